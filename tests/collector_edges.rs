//! Edges of OTLP/JSON and of the token check, against the running daemon over real sockets:
//! non-finite doubles written as the proto3 JSON mapping writes them are read; a result size no
//! result can have (negative, not finite, above 2^53) refuses its span alone, counted by reason,
//! never recorded and never paged; a client uploading megabytes with a wrong token reads its
//! 401.
#![cfg(feature = "collector")]

mod support;

use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::any_value::Value;
use support::collector::*;
use toolsize::collector::Daemon;

/// A tool span whose `tool.result.bytes` is the double `marker` (replaced in the JSON text).
fn sized_by_double(n: u64, tool: &str, marker: f64) -> opentelemetry_proto::tonic::trace::v1::Span {
    let mut sp = own_span(n, tool, 0);
    sp.attributes.retain(|a| a.key != "tool.result.bytes");
    sp.attributes
        .push(kv("tool.result.bytes", Value::DoubleValue(marker)));
    sp
}

async fn post_json(http: std::net::SocketAddr, body: String) -> (u16, serde_json::Value) {
    let r = reqwest::Client::new()
        .post(format!("http://{http}/v1/traces"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let text = r.bytes().await.unwrap_or_default();
    (status, serde_json::from_slice(&text).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_finite_doubles_are_read_and_absurd_sizes_refused_counted_never_paged() {
    let d = Daemon::start(&loopback_config()).await.unwrap();
    let (h, admin) = (d.otlp_http_addr, d.admin_addr);
    let mut latency_nan = own_span(1, "fine", 1000);
    latency_nan
        .attributes
        .retain(|a| a.key != "tool.latency_ms");
    latency_nan
        .attributes
        .push(kv("tool.latency_ms", Value::DoubleValue(33333.0)));
    let spans = vec![
        latency_nan,
        // The control: over the 16 KiB ceiling, it pages.
        own_span(2, "big", 100_000),
        sized_by_double(3, "infinite", 11111.0),
        sized_by_double(4, "astronomic", 22222.0),
        own_span(5, "negative", -5),
        own_span(6, "past_2_53", (1i64 << 53) + 1),
        sized_by_double(7, "not_a_number", 44444.0),
    ];
    let json = serde_json::to_string(&request("agent", spans)).unwrap();
    let body = json
        .replace("11111.0", "\"Infinity\"")
        .replace("22222.0", "1e300")
        .replace("33333.0", "\"NaN\"")
        .replace("44444.0", "\"NaN\"");
    assert!(body.contains(r#""doubleValue":"Infinity""#), "{body}");
    let (status, answer) = post_json(h, body).await;
    // Today's receivers refused the whole batch (400) for "Infinity".
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["partialSuccess"]["rejectedSpans"], "5", "{answer}");
    let big_alert = wait_for("the control's alert", Duration::from_secs(30), || async {
        let a = get_json(admin, "/api/v1/alerts").await;
        a["firing"]
            .as_array()?
            .iter()
            .find(|x| x["labels"]["tool"] == "big")
            .cloned()
    })
    .await;
    assert_eq!(big_alert["labels"]["alertname"], "ToolResultOverCeiling");
    let v = tools(admin, "").await;
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tool"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"fine") && names.contains(&"big"),
        "{names:?}"
    );
    for absurd in [
        "infinite",
        "astronomic",
        "negative",
        "past_2_53",
        "not_a_number",
    ] {
        assert!(!names.contains(&absurd), "{absurd} recorded: {names:?}");
    }
    let alerts = get_json(admin, "/api/v1/alerts").await;
    assert_eq!(alerts["firing"].as_array().unwrap().len(), 1, "{alerts}");
    let text = metrics(admin).await;
    assert_eq!(
        sample(
            &text,
            "toolsize_spans_refused_total{reason=\"invalid_size\"}"
        ),
        Some(5.0)
    );
    assert_eq!(
        sample(&text, "toolsize_spans_refused_total{reason=\"invalid\"}"),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, "toolsize_spans_accepted_total{kind=\"tool\"}"),
        Some(2.0)
    );
    // A coding agent's tool_result log record with such a size is refused the same way, alone.
    let log = |size: &str, id: &str| {
        format!(
            r#"{{"timeUnixNano":"1700000000000000000","body":{{"stringValue":"claude_code.tool_result"}},"attributes":[
              {{"key":"event.name","value":{{"stringValue":"tool_result"}}}},
              {{"key":"tool_name","value":{{"stringValue":"Read"}}}},
              {{"key":"tool_use_id","value":{{"stringValue":"{id}"}}}},
              {{"key":"success","value":{{"stringValue":"true"}}}},
              {{"key":"tool_result_size_bytes","value":{size}}}]}}"#
        )
    };
    let logs = format!(
        r#"{{"resourceLogs":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"claude-code"}}}}]}},
          "scopeLogs":[{{"scope":{{"name":"com.anthropic.claude_code.events"}},"logRecords":[{},{},{}]}}]}}]}}"#,
        log(r#"{"doubleValue":"Infinity"}"#, "toolu_1"),
        log(r#"{"intValue":"-3"}"#, "toolu_2"),
        log(r#"{"intValue":"2048"}"#, "toolu_3"),
    );
    let r = reqwest::Client::new()
        .post(format!("http://{h}/v1/logs"))
        .header("content-type", "application/json")
        .body(logs)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let text = wait_for(
        "the log records counted",
        Duration::from_secs(30),
        || async {
            let text = metrics(admin).await;
            (sample(&text, "toolsize_log_records_accepted_total{kind=\"tool\"}") == Some(1.0))
                .then_some(text)
        },
    )
    .await;
    assert_eq!(
        sample(
            &text,
            "toolsize_log_records_refused_total{reason=\"invalid_size\"}"
        ),
        Some(2.0)
    );
    // Still serving, and a doubleValue that is no number still refuses the batch.
    let bad = serde_json::to_string(&request("agent", vec![sized_by_double(8, "x", 55555.0)]))
        .unwrap()
        .replace("55555.0", "\"lots\"");
    assert_eq!(post_json(h, bad).await.0, 400);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_upload_of_megabytes_reads_its_401() {
    let mut cfg = loopback_config();
    let dir = temp_dir("edges-auth");
    std::fs::write(dir.join("token"), "right-token\n").unwrap();
    cfg.auth.token_file = Some(dir.join("token"));
    let d = Daemon::start(&cfg).await.unwrap();
    let client = reqwest::Client::new();
    let url = format!("http://{}/v1/traces", d.otlp_http_addr);
    // A batch of several megabytes sent with the wrong token: each time the client reads the
    // 401, not a broken pipe.
    let body = vec![7u8; 6 << 20];
    for _ in 0..5 {
        let r = client
            .post(&url)
            .header("content-type", "application/x-protobuf")
            .header("authorization", "Bearer wrong-token")
            .body(body.clone())
            .send()
            .await
            .expect("the client reads the answer");
        assert_eq!(r.status().as_u16(), 401);
        assert_eq!(r.headers()["www-authenticate"], "Bearer");
        let status: serde_json::Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
        assert!(
            status["message"].as_str().unwrap().contains("token"),
            "{status}"
        );
    }
    // The right token is served on the same client.
    let ok = client
        .post(&url)
        .header("content-type", "application/x-protobuf")
        .header("authorization", "Bearer right-token")
        .body(prost::Message::encode_to_vec(&request(
            "agent",
            vec![own_span(1, "t", 10)],
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    let v = d.stats().view();
    assert_eq!(v.refused_requests.unauthenticated, 5, "{v:?}");
    d.shutdown().await;
}

/// Every file under `dir`, read whole, searched for `needle`.
fn found_in_files(dir: &std::path::Path, needle: &str) -> bool {
    std::fs::read_dir(dir).unwrap().any(|e| {
        let p = e.unwrap().path();
        if p.is_dir() {
            return found_in_files(&p, needle);
        }
        let bytes = std::fs::read(&p).unwrap_or_default();
        memchr::memmem::find(&bytes, needle.as_bytes()).is_some()
    })
}

/// `recognition.keep_args_hashes = false` (here `TOOLSIZE_KEEP_ARGS_HASHES=false`): a hash sent
/// with every call reaches neither the API, nor the alerts, nor the snapshot; with the default,
/// the same calls show it in all three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn args_hashes_can_be_kept_out_of_the_api_alerts_and_snapshot() {
    const HASH: &str = "c0ffee5ec2e7";
    for keep in [true, false] {
        let dir = support::Scratch::new(if keep {
            "hashes-kept"
        } else {
            "hashes-dropped"
        });
        let env = [(
            "TOOLSIZE_KEEP_ARGS_HASHES",
            if keep { "true" } else { "false" },
        )];
        let b = Binary::start_with_env(&["--snapshot-interval", "1h"], Some(&dir), &env);
        let spans = (0..4)
            .map(|n| {
                let mut sp = own_span(n, "huge_call", 100_000);
                sp.attributes.retain(|a| a.key != "tool.args_hash");
                sp.attributes.push(s("tool.args_hash", HASH));
                sp
            })
            .collect();
        assert!(post_proto(b.http, &request("agent", spans))
            .await
            .status()
            .is_success());
        let admin = b.admin;
        let firing = wait_for("the alerts", Duration::from_secs(30), || async move {
            let a = get_json(admin, "/api/v1/alerts").await;
            let firing = a["firing"].as_array()?.clone();
            (firing.len() == if keep { 2 } else { 1 }).then_some(firing)
        })
        .await;
        let detail = reqwest::get(format!("http://{admin}/api/v1/tools/huge_call"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let alerts = serde_json::to_string(&firing).unwrap();
        assert_eq!(detail.contains(HASH), keep, "{detail}");
        assert_eq!(alerts.contains(HASH), keep, "{alerts}");
        assert_eq!(
            alerts.contains("ToolArgsRepeatedlyOversize"),
            keep,
            "{alerts}"
        );
        assert!(alerts.contains("ToolResultOverCeiling"), "{alerts}");
        b.stop();
        assert_eq!(found_in_files(&dir, HASH), keep, "snapshot of keep={keep}");
    }
}
