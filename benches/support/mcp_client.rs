//! A minimal MCP client over a child's stdio for the benches: newline-delimited JSON-RPC,
//! requests matched to responses by id, tool results read from `structuredContent`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

/// A running `paravault … mcp` server and the client's side of its pipes.
pub struct McpClient {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl McpClient {
    /// Starts `command` (a `paravault … mcp` command line) with piped stdin/stdout.
    pub fn spawn(mut command: Command) -> McpClient {
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn paravault mcp");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        McpClient { child, stdin, stdout, next_id: 1 }
    }

    /// Starts `command`, initializes as `client_name` and sends `notifications/initialized`.
    pub fn ready(command: Command, client_name: &str) -> McpClient {
        let mut client = McpClient::spawn(command);
        client.initialize(client_name);
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    /// The `initialize` request (panics unless it succeeds).
    pub fn initialize(&mut self, client_name: &str) {
        let response = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": client_name, "version": "1"}}),
        );
        assert!(response["result"].is_object(), "initialize failed: {response}");
    }

    /// Writes one message line.
    pub fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write request");
        stdin.flush().expect("flush request");
    }

    /// Sends a request and returns the response with its id (other lines are skipped).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.stdout.read_line(&mut line).expect("read response") > 0, "the server closed stdout");
            let message: Value = serde_json::from_str(&line).expect("JSON-RPC line");
            if message["id"] == json!(id) {
                return message;
            }
        }
    }

    /// Calls `tool` and returns its `structuredContent` (panics on an `isError` result).
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        let response = self.request("tools/call", json!({"name": tool, "arguments": args}));
        assert_eq!(response["result"]["isError"], false, "{tool} failed: {response}");
        response["result"]["structuredContent"].clone()
    }

    /// Closes stdin and waits for the server to exit.
    pub fn close(mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
