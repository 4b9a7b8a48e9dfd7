//! Unit tests for the stdio framing: each refused line gets exactly one typed answer, and
//! everything else reaches rmcp unchanged.

use super::*;
use tokio::io::AsyncReadExt;

fn answer(line: &str) -> Value {
    match judge(line.as_bytes()) {
        Verdict::Answer(frame) => serde_json::from_slice(&frame).unwrap(),
        Verdict::Forward => panic!("forwarded: {line}"),
        Verdict::Skip => panic!("skipped: {line}"),
    }
}

#[test]
fn invalid_json_is_a_parse_error_with_a_null_id() {
    let reply = answer("{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\":");
    assert_eq!(reply["error"]["code"], -32700);
    assert_eq!(reply["id"], Value::Null);
    assert_eq!(reply["jsonrpc"], "2.0");
}

#[test]
fn a_message_that_is_not_an_object_is_an_invalid_request() {
    assert_eq!(answer("[1, 2]")["error"]["code"], -32600);
    assert_eq!(answer("42")["error"]["code"], -32600);
}

#[test]
fn string_arguments_are_invalid_params_with_the_request_id() {
    let reply = answer(r#"{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":"lint_vault","arguments":"{}"}}"#);
    assert_eq!(reply["error"]["code"], -32602);
    assert_eq!(reply["id"], "abc");
    let reply = answer(r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"lint_vault","arguments":[1]}}"#);
    assert_eq!(reply["error"]["code"], -32602);
    assert_eq!(reply["id"], 9);
}

#[test]
fn well_formed_requests_and_blank_lines_pass() {
    for line in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lint_vault","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lint_vault"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    ] {
        assert!(matches!(judge(line.as_bytes()), Verdict::Forward), "{line}");
    }
    assert!(matches!(judge(b"   "), Verdict::Skip));
}

#[test]
fn the_id_of_an_over_long_line_is_recovered_from_its_first_bytes() {
    assert_eq!(recover_id(br#"{"jsonrpc":"2.0","id": 17,"method":"tools/call","params":{"#), json!(17));
    assert_eq!(recover_id(br#"{"id":"req-1","params":{"arguments":{"content":"xxxx"#), json!("req-1"));
    assert_eq!(recover_id(br#"{"params":{"arguments":{"content":"xxxxxxxx"#), Value::Null);
}

/// The next line the framing wrote, read byte by byte (nothing after it is consumed).
async fn read_reply(output: &mut tokio::io::DuplexStream) -> Value {
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while !reply.ends_with(b"\n") {
        output.read_exact(&mut byte).await.unwrap();
        reply.push(byte[0]);
    }
    serde_json::from_slice(&reply).unwrap()
}

#[tokio::test]
async fn an_over_long_line_is_answered_and_the_next_line_still_reaches_rmcp() {
    let (mut client, server_input) = tokio::io::duplex(1 << 16);
    let (server_output, mut client_output) = tokio::io::duplex(1 << 16);
    let ((mut rmcp_read, _rmcp_write), _framing) = framed(server_input, server_output, || {});
    let writer = tokio::spawn(async move {
        let mut big = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ingest_note","arguments":{"content":""#.to_vec();
        big.resize(FRAME_BYTES_MAX + 10, b'x');
        big.extend_from_slice(b"\"}}}\n");
        client.write_all(&big).await.unwrap();
        client.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}\n").await.unwrap();
        client.shutdown().await.unwrap();
    });
    let reply = read_reply(&mut client_output).await;
    assert_eq!(reply["id"], 7);
    assert_eq!(reply["error"]["code"], -32600);
    let mut forwarded = String::new();
    rmcp_read.read_to_string(&mut forwarded).await.unwrap();
    assert_eq!(forwarded, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}\n", "only the good line reaches rmcp");
    writer.await.unwrap();
}

#[tokio::test]
async fn after_line_runs_once_each_line_is_on_the_output() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (mut client, server_input) = tokio::io::duplex(1 << 16);
    let (server_output, mut client_output) = tokio::io::duplex(1 << 16);
    let written = Arc::new(AtomicUsize::new(0));
    let counter = written.clone();
    let (_rmcp, _framing) = framed(server_input, server_output, move || {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(written.load(Ordering::SeqCst), 0, "nothing written, nothing run");
    for n in 1..=3 {
        client.write_all(b"not json\n").await.unwrap();
        assert_eq!(read_reply(&mut client_output).await["error"]["code"], -32700);
        tokio::time::timeout(std::time::Duration::from_secs(5), async {
            while written.load(Ordering::SeqCst) < n {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("after_line ran for the line");
        assert_eq!(written.load(Ordering::SeqCst), n, "once per line");
    }
}
