//! Build script: the commit `toolsize --version` names (`TOOLSIZE_COMMIT`), from
//! `git rev-parse --short HEAD` when the source is a git checkout with git installed, else
//! `unknown`; a `TOOLSIZE_COMMIT` set in the build's environment (a build from a source archive)
//! wins. Rerun when HEAD or the branch it points at moves.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    let commit = std::env::var("TOOLSIZE_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=TOOLSIZE_COMMIT={commit}");
    println!("cargo:rerun-if-env-changed=TOOLSIZE_COMMIT");
    // Only files that exist: a missing one would rerun the script on every build.
    let watch = |path: Option<String>| {
        if let Some(p) = path.filter(|p| std::path::Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={p}");
        }
    };
    watch(git(&["rev-parse", "--git-path", "HEAD"]));
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(git(&["rev-parse", "--git-path", &branch]));
    }
}
