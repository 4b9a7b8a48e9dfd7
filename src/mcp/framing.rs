//! The stdio framing in front of rmcp: every request line that has an id gets exactly one
//! response, including the lines rmcp would drop or answer wrongly.
//!
//! stdin is read here, one newline-terminated line at a time, at most `FRAME_BYTES_MAX` bytes
//! buffered. A line is answered here, and not passed on, when it is
//! - longer than the limit: `-32600` (invalid request), with the id if the line's first bytes
//!   name one, else `null`; the rest of the line is read and discarded, never buffered;
//! - not JSON: `-32700` (parse error), id `null`;
//! - JSON but not an object (or a batch array): `-32600`, id `null`;
//! - a `tools/call` whose `params.arguments` is neither an object nor absent: `-32602`
//!   (invalid params), with its id.
//!
//! Every other line goes to rmcp through an in-memory pipe. One task writes stdout: rmcp's
//! frames (forwarded line by line from its side of the pipe) and the answers above never
//! interleave inside a line.

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Longest request line accepted, in bytes.
pub(crate) const FRAME_BYTES_MAX: usize = 16 << 20;

/// How many bytes of an over-long line are kept to recover its id.
const ID_PREFIX_BYTES: usize = 4096;

/// Capacity of the in-memory pipe to and from rmcp.
const PIPE_BYTES: usize = 1 << 20;

/// The framing's tasks; `drain` waits until every response rmcp wrote is on stdout.
pub struct Framing {
    forward: JoinHandle<()>,
    writer: JoinHandle<()>,
}

impl Framing {
    /// Waits (at most `timeout`) until rmcp's side of the pipe is closed and every frame it
    /// wrote has been written to stdout.
    pub async fn drain(self, timeout: std::time::Duration) {
        let _ = tokio::time::timeout(timeout, async {
            let _ = self.forward.await;
            let _ = self.writer.await;
        })
        .await;
    }
}

/// The transport rmcp serves (its reader and writer), fed from stdin and written to stdout;
/// `after_line` runs on the writer task each time a line has been flushed to stdout (work owed
/// after an answer starts there, once the client can read it).
pub fn stdio(after_line: impl Fn() + Send + 'static) -> ((ReadHalf<DuplexStream>, WriteHalf<DuplexStream>), Framing) {
    framed(tokio::io::stdin(), tokio::io::stdout(), after_line)
}

/// `stdio` over any input and output (tests drive it with in-memory streams).
pub fn framed<I, O>(
    input: I,
    output: O,
    after_line: impl Fn() + Send + 'static,
) -> ((ReadHalf<DuplexStream>, WriteHalf<DuplexStream>), Framing)
where
    I: AsyncRead + Unpin + Send + 'static,
    O: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_side, our_side) = tokio::io::duplex(PIPE_BYTES);
    let (from_rmcp, to_rmcp) = tokio::io::split(our_side);
    let (lines_tx, lines_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(write_lines(output, lines_rx, after_line));
    let forward = tokio::spawn(forward_lines(from_rmcp, lines_tx.clone()));
    tokio::spawn(read_requests(input, to_rmcp, lines_tx));
    (tokio::io::split(rmcp_side), Framing { forward, writer })
}

/// Writes whole lines to `output`, in the order they arrive, until the empty line that marks
/// the end of rmcp's output; `after_line` runs after each line is flushed.
async fn write_lines<O: AsyncWrite + Unpin>(mut output: O, mut lines: mpsc::UnboundedReceiver<Vec<u8>>, after_line: impl Fn()) {
    while let Some(line) = lines.recv().await {
        if line.is_empty() || output.write_all(&line).await.is_err() || output.flush().await.is_err() {
            break;
        }
        after_line();
    }
}

/// Forwards rmcp's frames, line by line, to the stdout writer; an empty line marks their end.
async fn forward_lines<R: AsyncRead + Unpin>(from_rmcp: R, lines: mpsc::UnboundedSender<Vec<u8>>) {
    let mut reader = BufReader::new(from_rmcp);
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                if lines.send(line).is_err() {
                    break;
                }
            }
        }
    }
    let _ = lines.send(Vec::new());
}

/// One line of input as read: whole, or over the limit (only its first bytes kept).
enum Line {
    Whole(Vec<u8>),
    TooLong { prefix: Vec<u8> },
}

/// Reads the next line (without its newline), buffering at most `FRAME_BYTES_MAX` bytes.
/// `None` at end of input.
async fn next_line<R: AsyncBufReadExt + Unpin>(reader: &mut R) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut too_long = false;
    let mut read_any = false;
    loop {
        let buffer = reader.fill_buf().await?;
        if buffer.is_empty() {
            if !read_any {
                return Ok(None);
            }
            break;
        }
        read_any = true;
        let (chunk, found_newline) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (&buffer[..at], true),
            None => (buffer, false),
        };
        if !too_long {
            if line.len() + chunk.len() > FRAME_BYTES_MAX {
                too_long = true;
                let keep = ID_PREFIX_BYTES.saturating_sub(line.len()).min(chunk.len());
                line.extend_from_slice(&chunk[..keep]);
                line.truncate(ID_PREFIX_BYTES);
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let consumed = chunk.len() + usize::from(found_newline);
        reader.consume(consumed);
        if found_newline {
            break;
        }
    }
    Ok(Some(if too_long { Line::TooLong { prefix: line } } else { Line::Whole(line) }))
}

/// The id named near the start of an over-long line (`"id": 7` or `"id": "x"`), if any.
fn recover_id(prefix: &[u8]) -> Value {
    let text = String::from_utf8_lossy(prefix);
    let Some(at) = text.find("\"id\"") else { return Value::Null };
    let rest = text[at + 4..].trim_start();
    let Some(rest) = rest.strip_prefix(':') else { return Value::Null };
    let rest = rest.trim_start();
    if let Some(quoted) = rest.strip_prefix('"') {
        return quoted.find('"').map_or(Value::Null, |end| Value::String(quoted[..end].to_string()));
    }
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
    digits.parse::<i64>().map_or(Value::Null, |n| json!(n))
}

fn error_line(id: Value, code: i64, message: &str) -> Vec<u8> {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string().into_bytes();
    line.push(b'\n');
    line
}

/// What to do with one whole line.
enum Verdict {
    /// Pass it to rmcp.
    Forward,
    /// Answer it here with this frame.
    Answer(Vec<u8>),
    /// Nothing to do (a blank line).
    Skip,
}

fn judge(line: &[u8]) -> Verdict {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Skip;
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(e) => return Verdict::Answer(error_line(Value::Null, -32700, &format!("Parse error: {e}"))),
    };
    let Value::Object(message) = &value else {
        return Verdict::Answer(error_line(Value::Null, -32600, "Invalid Request: a message must be one JSON object"));
    };
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    if message.get("method").and_then(Value::as_str) == Some("tools/call")
        && let Some(arguments) = message.get("params").and_then(|p| p.get("arguments"))
        && !(arguments.is_object() || arguments.is_null())
    {
        return Verdict::Answer(error_line(id, -32602, "Invalid params: tools/call arguments must be a JSON object"));
    }
    Verdict::Forward
}

/// Reads requests from `input`: answers the ones `judge` refuses, passes the rest to rmcp, and
/// closes rmcp's input at end of input.
async fn read_requests<I: AsyncRead + Unpin>(input: I, mut to_rmcp: WriteHalf<DuplexStream>, lines: mpsc::UnboundedSender<Vec<u8>>) {
    let mut reader = BufReader::new(input);
    loop {
        match next_line(&mut reader).await {
            Ok(None) | Err(_) => break,
            Ok(Some(Line::TooLong { prefix })) => {
                let message = format!("Invalid Request: the request line is longer than {FRAME_BYTES_MAX} bytes");
                if lines.send(error_line(recover_id(&prefix), -32600, &message)).is_err() {
                    break;
                }
            }
            Ok(Some(Line::Whole(line))) => match judge(&line) {
                Verdict::Skip => {}
                Verdict::Answer(frame) => {
                    if lines.send(frame).is_err() {
                        break;
                    }
                }
                Verdict::Forward => {
                    let mut frame = line;
                    frame.push(b'\n');
                    if to_rmcp.write_all(&frame).await.is_err() || to_rmcp.flush().await.is_err() {
                        break;
                    }
                }
            },
        }
    }
    let _ = to_rmcp.shutdown().await;
}

#[cfg(test)]
mod tests;
