//! Snapshot failures are loud: the real `toolsize serve` with a data directory it cannot write
//! (read-only, a full disk, a directory where the snapshot goes) removes its temporary file,
//! counts every failure, reports not ready on `/readyz` while writes keep failing or while one
//! hangs (a stalled disk), recovers when the disk does, and exits 1 when the final snapshot at
//! shutdown fails. A data directory that cannot be written at start stops the start before
//! listening (exit 2, its flag and key named).
#![cfg(feature = "collector")]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use support::collector::*;

const TMP: &str = ".toolsize-state.json.tmp";
const SNAPSHOT: &str = "toolsize-state.json";

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("id");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

async fn readyz(admin: std::net::SocketAddr) -> (u16, String) {
    let r = reqwest::get(format!("http://{admin}/readyz"))
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// Starts the binary on `dir` with a 100 ms snapshot interval, sends one span, waits for
/// `/readyz` to report the failing writes, and checks that SIGTERM exits 1 with no temporary
/// file left behind.
async fn fails_loudly(dir: &Path, after_start: impl FnOnce()) {
    let mut b = Binary::start_with_env(
        &["--snapshot-interval", "100ms"],
        Some(dir),
        &[("RUST_LOG", "off")],
    );
    after_start();
    let r = post_proto(b.http, &request("agent", vec![own_span(1, "read", 10)])).await;
    assert_eq!(r.status().as_u16(), 200);
    let body = wait_for("/readyz 503", Duration::from_secs(30), || async {
        let (status, body) = readyz(b.admin).await;
        (status == 503).then_some(body)
    })
    .await;
    assert!(body.contains("snapshot writes failed"), "{body}");
    let text = metrics(b.admin).await;
    assert!(sample(&text, "toolsize_snapshot_failures_total").unwrap() >= 3.0);
    assert!(!dir.join(TMP).exists(), "temporary file left");
    b.signal("-TERM");
    let st = b.child.wait().unwrap();
    assert_eq!(st.code(), Some(1), "final snapshot failed, exit {st}");
    assert!(!dir.join(TMP).exists(), "temporary file left");
}

#[tokio::test]
async fn a_directory_in_place_of_the_snapshot_fails_every_write() {
    // (At start, a directory there makes the data directory unusable: the daemon refuses to
    // start. Made after the start, every rename over it fails.)
    let dir = temp_dir("snap-dir");
    fails_loudly(&dir, || {
        let _ = std::fs::remove_file(dir.join(SNAPSHOT));
        std::fs::create_dir_all(dir.join(SNAPSHOT).join("x")).unwrap();
    })
    .await;
}

/// A data directory that cannot be written: a read-only tmpfs for root (who ignores file
/// modes), mode 0555 for others. Made read-only by `lock` after `unlock_first` ran on it.
struct ReadOnly<'a> {
    dir: &'a Path,
    mounted: bool,
}

impl<'a> ReadOnly<'a> {
    /// `dir` made writable now and read-only by [`ReadOnly::lock`].
    fn new(dir: &'a Path) -> Self {
        let mounted = is_root();
        if mounted {
            let st = Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
                .arg(dir)
                .status()
                .expect("mount");
            assert!(st.success(), "cannot mount a tmpfs as root");
        }
        ReadOnly { dir, mounted }
    }

    fn lock(&self) {
        let st = if self.mounted {
            Command::new("mount")
                .args(["-o", "remount,ro"])
                .arg(self.dir)
                .status()
        } else {
            Command::new("chmod").arg("0555").arg(self.dir).status()
        };
        assert!(st.unwrap().success());
        assert!(
            std::fs::write(self.dir.join("probe"), b"x").is_err(),
            "the directory is writable"
        );
    }
}

impl Drop for ReadOnly<'_> {
    fn drop(&mut self) {
        let _ = match self.mounted {
            true => Command::new("umount").arg(self.dir).status(),
            false => Command::new("chmod").arg("0755").arg(self.dir).status(),
        };
    }
}

#[tokio::test]
async fn a_data_dir_made_read_only_after_start_fails_loudly() {
    let dir = temp_dir("snap-ro");
    let ro = ReadOnly::new(&dir);
    fails_loudly(&dir, || ro.lock()).await;
}

#[test]
fn a_read_only_data_dir_stops_the_start_with_its_flag_and_key() {
    let dir = temp_dir("snap-ro-start");
    let ro = ReadOnly::new(&dir);
    ro.lock();
    let out = support::cli::toolsize()
        .args([
            "serve",
            "--otlp-grpc-addr",
            "127.0.0.1:0",
            "--otlp-http-addr",
        ])
        .args(["127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--data-dir"])
        .arg(&*dir)
        .env("RUST_LOG", "off")
        .output()
        .expect("run toolsize serve");
    // Stopped before listening: no ready line, exit 2, the key and flag named.
    let error = support::cli::structured_error(&out);
    assert_eq!(error["code"], "START", "{error}");
    let message = error["message"].as_str().unwrap();
    for named in [
        "--data-dir",
        "TOOLSIZE_DATA_DIR",
        "`store.data_dir`",
        "cannot be written",
    ] {
        assert!(message.contains(named), "{named} not in {message}");
    }
}

#[tokio::test]
async fn a_full_disk_fails_and_recovers() {
    let dir = temp_dir("snap-full");
    let b = Binary::start_with_env(
        &["--snapshot-interval", "100ms"],
        Some(&dir),
        &[("RUST_LOG", "off")],
    );
    let r = post_proto(b.http, &request("agent", vec![own_span(1, "read", 10)])).await;
    assert_eq!(r.status().as_u16(), 200);
    wait_for("a snapshot", Duration::from_secs(30), || async {
        dir.join(SNAPSHOT).exists().then_some(())
    })
    .await;
    // The next write goes to /dev/full: ENOSPC, like a full disk. The temporary file (here the
    // link) is removed, so the write after it succeeds again.
    let failures = |t: &str| sample(t, "toolsize_snapshot_failures_total").unwrap();
    let before = failures(&metrics(b.admin).await);
    std::os::unix::fs::symlink("/dev/full", dir.join(TMP)).unwrap();
    wait_for("a failed write", Duration::from_secs(30), || async {
        (failures(&metrics(b.admin).await) > before).then_some(())
    })
    .await;
    assert!(std::fs::symlink_metadata(dir.join(TMP)).is_err(), "left");
    let written = sample(&metrics(b.admin).await, "toolsize_snapshots_written_total").unwrap();
    wait_for(
        "a write after the failure",
        Duration::from_secs(30),
        || async {
            let t = metrics(b.admin).await;
            (sample(&t, "toolsize_snapshots_written_total").unwrap() > written).then_some(())
        },
    )
    .await;
    assert_eq!(
        readyz(b.admin).await.0,
        200,
        "one failure is not persistent"
    );
    b.stop();
}

#[tokio::test]
async fn a_tiny_tmpfs_fills_up_and_the_partial_file_is_removed() {
    if !is_root() {
        // CI runs as root (it installs the peers with apt-get): there this must not skip.
        assert!(
            missing_peers_allowed(),
            "mounting a tiny tmpfs needs root (set TOOLSIZE_ALLOW_MISSING_PEERS=1 to skip it; \
             /dev/full covers ENOSPC above)"
        );
        eprintln!("SKIPPED: mounting a tiny tmpfs needs root; /dev/full covers ENOSPC above");
        return;
    }
    let dir = temp_dir("snap-tmpfs");
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8k", "tmpfs"])
        .arg(&dir)
        .status()
        .expect("mount");
    assert!(st.success(), "cannot mount a tmpfs as root");
    let mut b = Binary::start_with_env(
        &["--snapshot-interval", "100ms"],
        Some(&dir),
        &[("RUST_LOG", "off")],
    );
    // Enough series that the snapshot is larger than the volume.
    let spans = (0..200)
        .map(|n| own_span(n, &format!("tool{n}"), 10))
        .collect();
    let r = post_proto(b.http, &request("agent", spans)).await;
    assert_eq!(r.status().as_u16(), 200);
    wait_for("/readyz 503", Duration::from_secs(30), || async {
        (readyz(b.admin).await.0 == 503).then_some(())
    })
    .await;
    assert!(
        !dir.join(TMP).exists(),
        "the partial file keeps the disk full"
    );
    let df = Command::new("df")
        .arg("--output=used")
        .arg(&dir)
        .output()
        .unwrap();
    eprintln!(
        "tmpfs use after failed writes: {}",
        String::from_utf8_lossy(&df.stdout)
    );
    b.signal("-TERM");
    assert_eq!(b.child.wait().unwrap().code(), Some(1));
    Command::new("umount").arg(&dir).status().unwrap();
}

/// The deadlines follow what this machine takes now: the time from the start to the first
/// snapshot on disk (a start, a capture, a write and an fsync) sets the slack every wait gets.
/// The bound checked is the daemon's own (2 intervals + 5 s from the capture on disk), read
/// against the test's clock from the snapshot age the daemon reports as the stall begins, not
/// from when the test happened to place the FIFO.
#[tokio::test]
async fn a_stalled_write_makes_the_daemon_not_ready_until_it_ends() {
    const BOUND: Duration = Duration::from_millis(2 * 100 + 5_000);
    // Wall clock (the daemon's ages) against the test's monotonic clock.
    const CLOCKS: f64 = 0.05;
    let dir = temp_dir("snap-stall");
    let started = std::time::Instant::now();
    let b = Binary::start_with_env(
        &["--snapshot-interval", "100ms"],
        Some(&dir),
        &[("RUST_LOG", "off")],
    );
    wait_for("a snapshot", Duration::from_secs(60), || async {
        dir.join(SNAPSHOT).exists().then_some(())
    })
    .await;
    let slack = (started.elapsed() * 10).max(Duration::from_secs(5));
    eprintln!(
        "first snapshot after {:?}: slack {slack:?}",
        started.elapsed()
    );
    // The next write opens a FIFO with no reader: it hangs, as on a stalled disk. (Made between
    // two writes: while one runs, its temporary file is there.)
    wait_for("a FIFO in place of the temporary file", slack, || async {
        let st = Command::new("mkfifo").arg(dir.join(TMP)).status().unwrap();
        st.success().then_some(())
    })
    .await;
    // No write succeeds from here on: the capture on disk is `age` old at `asked` or later.
    let asked = std::time::Instant::now();
    let age = sample(&metrics(b.admin).await, "toolsize_snapshot_age_seconds").unwrap();
    let body = wait_for("/readyz 503", BOUND + slack, || async {
        let (status, body) = readyz(b.admin).await;
        (status == 503).then_some(body)
    })
    .await;
    // Not before the bound: the 503 came at least BOUND after the capture on disk.
    let waited = asked.elapsed().as_secs_f64();
    assert!(
        waited + age + CLOCKS >= BOUND.as_secs_f64(),
        "503 after {waited:.3} s, the capture then {age:.3} s old"
    );
    assert!(body.contains("a write is stalled"), "{body}");
    let age = sample(&metrics(b.admin).await, "toolsize_snapshot_age_seconds").unwrap();
    assert!(age > BOUND.as_secs_f64(), "{age}");
    // The disk answers again: the write ends (a FIFO cannot be fsynced: that write fails and
    // its temporary file goes), the next one succeeds, and the daemon is ready.
    let fifo = dir.join(TMP);
    let freed = std::time::Instant::now();
    let reader = std::thread::spawn(move || std::fs::read(fifo).map(|b| b.len()));
    wait_for("/readyz 200", slack, || async {
        (readyz(b.admin).await.0 == 200).then_some(())
    })
    .await;
    assert!(
        reader.join().unwrap().unwrap() > 0,
        "the stalled write wrote"
    );
    // The capture on disk now was taken after the stall ended (the next capture waits for the
    // write in flight).
    let age = sample(&metrics(b.admin).await, "toolsize_snapshot_age_seconds").unwrap();
    let since = freed.elapsed().as_secs_f64();
    assert!(
        age <= since + CLOCKS,
        "{age} s old, the stall ended {since} s ago"
    );
    b.stop();
}
