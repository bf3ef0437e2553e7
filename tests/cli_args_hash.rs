//! `toolsize args-hash` against the real python3, and its structured error on bad input.
#![cfg(feature = "cli")]

#[path = "support/cli.rs"]
mod cli;

use std::io::Write;
use std::process::{Command, Stdio};

use cli::{run, structured_error};

fn toolsize(stdin: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["args-hash"];
    all.extend_from_slice(args);
    run(&all, Some(stdin.as_bytes()))
}

fn python_hash(text: &str) -> String {
    let script = "import sys, json, hashlib\n\
                  a = json.loads(sys.stdin.read())\n\
                  print(hashlib.sha1(json.dumps(a, sort_keys=True, default=str).encode()).hexdigest()[:12])";
    let mut child = Command::new(cli::python3())
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 must be installed (scripts/test.sh installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn prints_the_same_hash_as_python() {
    for text in [
        r#"{"query": "rust", "limit": 10}"#,
        r#"{"z": {"b": [1.0, 1e-7, 1e16, -0.0]}, "a": "naïve 😀"}"#,
        r#"{"big": 123456789012345678901234567890, "nan": NaN}"#,
        "[]",
        "\"just a string\"",
    ] {
        let out = toolsize(text, &[]);
        assert!(out.status.success(), "{text}: {out:?}");
        let ours = String::from_utf8(out.stdout).unwrap();
        assert_eq!(ours.trim(), python_hash(text), "{text}");
    }
}

#[test]
fn canonical_flag_prints_what_was_hashed() {
    let out = toolsize(r#"{"b":1,"a":"é"}"#, &["--canonical"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1], r#"{"a": "\u00e9", "b": 1}"#);
}

#[test]
fn invalid_json_exits_2_with_a_structured_error() {
    let err = structured_error(&toolsize("{\"a\": [1, 2", &[]));
    assert_eq!(err["code"], "INVALID_JSON");
    assert!(err["message"].as_str().unwrap().contains("line 1"));
}

#[test]
fn bad_flags_are_a_structured_usage_error() {
    let err = structured_error(&run(&["args-hash", "--canonicle"], None));
    assert_eq!(err["code"], "USAGE");
    let message = err["message"].as_str().unwrap();
    assert!(message.contains("--canonical"), "did you mean: {message}");

    let help = run(&["--help"], None);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("args-hash"));
}

/// With a key (a file, or `$TOOLSIZE_ARGS_HASH_KEY`), the keyed hash Python's `hmac` gives;
/// `--unkeyed` the plain one; a key file that cannot be used is a structured usage error.
#[test]
fn a_key_gives_pythons_hmac() {
    let text = r#"{"path": "/home/alice/.ssh/id_rsa", "n": 1}"#;
    let script = "import sys, json, hashlib, hmac\n\
                  a = json.loads(sys.stdin.read())\n\
                  c = json.dumps(a, sort_keys=True, default=str).encode()\n\
                  print(hmac.new(b'team key', c, hashlib.sha1).hexdigest()[:12])";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 must be installed (scripts/test.sh installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let want = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let dir = std::env::temp_dir().join(format!("toolsize-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key_file = dir.join("key");
    std::fs::write(&key_file, "team key\n").unwrap();
    let keyed = toolsize(text, &["--key-file", key_file.to_str().unwrap()]);
    assert!(keyed.status.success());
    assert_eq!(String::from_utf8_lossy(&keyed.stdout).trim(), want);
    let from_env = Command::new(env!("CARGO_BIN_EXE_toolsize"))
        .arg("args-hash")
        .env("TOOLSIZE_ARGS_HASH_KEY", "team key")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(text.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&from_env.stdout).trim(), want);
    let plain = toolsize(text, &["--unkeyed"]);
    assert_eq!(
        String::from_utf8_lossy(&plain.stdout).trim(),
        python_hash(text)
    );
    assert_ne!(want, python_hash(text));
    std::fs::write(&key_file, "\n").unwrap();
    let empty = toolsize(text, &["--key-file", key_file.to_str().unwrap()]);
    assert_eq!(empty.status.code(), Some(2));
    assert_eq!(structured_error(&empty)["code"], "EMPTY_KEY");
    let missing = toolsize(text, &["--key-file", dir.join("nope").to_str().unwrap()]);
    assert_eq!(missing.status.code(), Some(2));
    assert_eq!(structured_error(&missing)["code"], "KEY_FILE_UNREADABLE");
    let _ = std::fs::remove_dir_all(&dir);
}
