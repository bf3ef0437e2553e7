//! A real Prometheus (Debian's `prometheus`) on a loopback port, scraping daemons every second,
//! with the query API the dashboard and fleet tests use. A missing `prometheus` fails the test
//! unless `TOOLSIZE_ALLOW_MISSING_PEERS=1`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::collector::{free_port, require, wait_for};

/// The program.
pub const PROMETHEUS: &str = "prometheus";

/// The flag that makes Prometheus (2.40 and later) negotiate the protobuf exposition and keep
/// native histograms. Prometheus 2.42 then keeps only the native histogram of a metric that has
/// one, not its classic `_bucket` series.
pub const NATIVE_HISTOGRAMS: &str = "--enable-feature=native-histograms";

/// Whether `prometheus` runs (see [`require`]).
pub fn available() -> bool {
    require(PROMETHEUS, &["--version"])
}

/// One Prometheus server, killed on drop.
pub struct Prometheus {
    child: Child,
    /// Its HTTP address.
    pub addr: SocketAddr,
    /// Its directory (configuration, TSDB, log).
    pub dir: PathBuf,
}

impl Prometheus {
    /// Starts Prometheus in `dir`, scraping `targets` every second as `job="toolsize"` and
    /// evaluating `rule_files` every second; returns once it is ready.
    /// With `TOOLSIZE_PROMETHEUS_NATIVE=1`, it runs with [`NATIVE_HISTOGRAMS`]: the README's
    /// test command runs the dashboard and rules tests once more that way.
    pub async fn start(dir: &Path, targets: &[SocketAddr], rule_files: &[PathBuf]) -> Self {
        let native = std::env::var("TOOLSIZE_PROMETHEUS_NATIVE").is_ok_and(|v| v == "1");
        let flags: &[&str] = if native { &[NATIVE_HISTOGRAMS] } else { &[] };
        Self::start_with(dir, targets, rule_files, flags).await
    }

    /// [`Prometheus::start`] with more command-line flags, e.g. [`NATIVE_HISTOGRAMS`].
    pub async fn start_with(
        dir: &Path,
        targets: &[SocketAddr],
        rule_files: &[PathBuf],
        flags: &[&str],
    ) -> Self {
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let rules: Vec<String> = rule_files
            .iter()
            .map(|f| format!("  - '{}'\n", f.canonicalize().unwrap().display()))
            .collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n\
             rule_files:\n{}\
             scrape_configs:\n  - job_name: toolsize\n    static_configs:\n      - targets: [{}]\n",
            if rules.is_empty() {
                "  []\n".to_string()
            } else {
                rules.concat()
            },
            targets.join(", ")
        );
        Self::start_config(dir, &config, flags).await
    }

    /// Starts Prometheus in `dir` with the whole configuration `config` (YAML) and more
    /// command-line flags; returns once it is ready.
    pub async fn start_config(dir: &Path, config: &str, flags: &[&str]) -> Self {
        let file = dir.join("prometheus.yml");
        std::fs::write(&file, config).unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .args(flags)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn prometheus");
        let p = Self {
            child,
            addr,
            dir: dir.to_path_buf(),
        };
        wait_for("prometheus ready", Duration::from_secs(30), || async {
            let r = reqwest::get(format!("http://{addr}/-/ready")).await.ok()?;
            r.status().is_success().then_some(())
        })
        .await;
        p
    }

    /// GETs an API path with query parameters: the whole JSON answer, checked for success.
    async fn get(&self, path: &str, params: &[(&str, &str)]) -> Value {
        let url = reqwest::Url::parse_with_params(&format!("http://{}{path}", self.addr), params)
            .unwrap();
        let r = reqwest::get(url).await.unwrap();
        let status = r.status();
        let body: Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
        assert!(
            status.is_success() && body["status"] == "success",
            "prometheus {path} {params:?}: {status} {body}"
        );
        body
    }

    /// The `data` of an API answer.
    async fn api(&self, path: &str, params: &[(&str, &str)]) -> Value {
        self.get(path, params).await["data"].take()
    }

    /// An instant query at `time` (Unix seconds; now when `None`): the result vector.
    pub async fn query_at(&self, expr: &str, time: Option<f64>) -> Vec<Value> {
        let t = time.map(|t| format!("{t:.3}"));
        let mut params = vec![("query", expr)];
        if let Some(t) = &t {
            params.push(("time", t));
        }
        let data = self.api("/api/v1/query", &params).await;
        match data["resultType"].as_str() {
            Some("vector") | Some("matrix") => data["result"].as_array().unwrap().clone(),
            // A scalar or string: one value.
            _ => vec![data["result"].clone()],
        }
    }

    /// `GET /api/v1/query_exemplars` for `expr` over the last `secs` seconds: per series, its
    /// labels and exemplars.
    pub async fn query_exemplars(&self, expr: &str, secs: u64) -> Vec<Value> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let (start, end) = (
            format!("{:.3}", now - secs as f64),
            format!("{:.3}", now + 60.0),
        );
        let data = self
            .api(
                "/api/v1/query_exemplars",
                &[("query", expr), ("start", &start), ("end", &end)],
            )
            .await;
        data.as_array().cloned().unwrap_or_default()
    }

    /// An instant query now.
    pub async fn query(&self, expr: &str) -> Vec<Value> {
        self.query_at(expr, None).await
    }

    /// A range query over the last `secs` seconds with a 1 s step: the result matrix.
    pub async fn query_range(&self, expr: &str, secs: u64) -> Vec<Value> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let (start, end) = (format!("{:.3}", now - secs as f64), format!("{now:.3}"));
        let data = self
            .api(
                "/api/v1/query_range",
                &[
                    ("query", expr),
                    ("start", &start),
                    ("end", &end),
                    ("step", "1"),
                ],
            )
            .await;
        data["result"].as_array().unwrap().clone()
    }

    /// The values of `label` on series matching `matcher` (`label_values(matcher, label)`).
    pub async fn label_values(&self, matcher: &str, label: &str) -> Vec<String> {
        self.api(
            &format!("/api/v1/label/{label}/values"),
            &[("match[]", matcher)],
        )
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
    }

    /// The rule groups Prometheus loaded (`/api/v1/rules`).
    pub async fn rules(&self) -> Vec<Value> {
        self.api("/api/v1/rules", &[]).await["groups"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// The scrape targets' health (`/api/v1/targets`): (scrape URL, health).
    pub async fn targets(&self) -> Vec<(String, String)> {
        self.api("/api/v1/targets", &[]).await["activeTargets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["scrapeUrl"].as_str().unwrap().to_string(),
                    t["health"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    /// Waits until every target was scraped successfully.
    pub async fn wait_targets_up(&self) {
        wait_for("every target up", Duration::from_secs(30), || async {
            let t = self.targets().await;
            (!t.is_empty() && t.iter().all(|(_, h)| h == "up")).then_some(())
        })
        .await;
    }

    /// The first value of an instant query's first sample, as a number.
    pub async fn scalar(&self, expr: &str) -> Option<f64> {
        let v = self.query(expr).await;
        sample_value(v.first()?)
    }
}

/// The numeric value of one result sample (`{"metric":…, "value": [t, "v"]}`).
pub fn sample_value(s: &Value) -> Option<f64> {
    s["value"][1].as_str()?.parse().ok()
}

impl Drop for Prometheus {
    /// Stops Prometheus; its directory (configuration, TSDB, log) is kept only when the test
    /// failed, for its log.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
