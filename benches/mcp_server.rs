//! MCP server benchmark: the built `paravault mcp` binary driven over stdio, next to physical
//! floors measured in the same run. Cold start (spawn → initialize response) against spawning
//! `/bin/true`; get_server_info and search_vault_tool round trips against an MCP `ping` round
//! trip (and search against the same query in-process, and the envelope's serialisation into the
//! text block alone); rot_audit on a generated vault, first
//! call (inventory load included) and warm. Run: `cargo bench --bench mcp_server`.
//! Environment: `PARAVAULT_BENCH_NOTES=20000` (a comma list; e.g. `20000,100000`),
//! `PARAVAULT_BENCH_ROUNDS=200` (round trips per figure), `PARAVAULT_BENCH_BASELINE_BIN=<an older
//! paravault binary>`: also the paired figures, old and new binary interleaved call by call on
//! the same vault (cold start, get_server_info, validate_memory_state, ensure_sub_index, search,
//! search right after a write, and ingest_note writes next to a durable 4 KiB replace).
//! Read after write (issue 52): each round an MCP ping (the floor), the search with no write
//! since the last one (quiet), an `ingest_note` (not timed) and the same search again; the
//! ratio of the two search medians is printed.
//! `PARAVAULT_BENCH_LAYOUT=wide`: only issue 52's wide-folder rows (40 notes per folder, all
//! under `03_Resources/topicN/`; each write a new note in a new folder there), see `wide`; it
//! also times an agent that reads an answer before it searches (a 5 ms pause after a write,
//! paired with the same pause after a search) and a write right after a write;
//! `PARAVAULT_BENCH_KEEP=1` keeps the generated vault (`target/bench-data/work/wide-<n>`);
//! `PARAVAULT_BENCH_VAULT_PER_BINARY=1` gives the old and the new binary a copy each (for a
//! baseline whose catalog layout differs, issue 52).

// Bench fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

#[path = "support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use paravault::Vault;
use paravault::retrieval::{SearchParams, SyncParams};
use serde_json::{Value, json};
use support::stats::{ms, report};

const BIN: &str = env!("CARGO_BIN_EXE_paravault");

/// The queries of benches/search_path.rs, so the in-process figures compare with its results.
const QUERIES: &[&str] = &[
    "vault search",
    "index policy",
    "graph memory agent",
    "\"catalog note\"",
    "receipt",
    "archive lint",
    "semantic retrieval",
    "project plan",
    "daily log review",
    "knowledge base",
];

struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    last_bytes: usize,
}

impl Client {
    fn spawn(vault: &Path) -> Client {
        Client::spawn_binary(Path::new(BIN), vault)
    }

    fn spawn_binary(binary: &Path, vault: &Path) -> Client {
        let mut child = Command::new(binary)
            .arg("--vault")
            .arg(vault)
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn paravault mcp");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Client { child, stdin, stdout, next_id: 1, last_bytes: 0 }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write request");
        stdin.flush().expect("flush request");
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.stdout.read_line(&mut line).expect("read response") > 0, "the server closed stdout");
            let message: Value = serde_json::from_str(&line).expect("JSON-RPC line");
            if message["id"] == json!(id) {
                self.last_bytes = line.len();
                return message;
            }
        }
    }

    fn initialize(&mut self) -> Value {
        let response = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "mcp-bench", "version": "1"}}),
        );
        assert!(response["result"].is_object(), "initialize failed: {response}");
        response
    }

    fn ready(vault: &Path) -> Client {
        Client::ready_binary(Path::new(BIN), vault)
    }

    fn ready_binary(binary: &Path, vault: &Path) -> Client {
        let mut client = Client::spawn_binary(binary, vault);
        client.initialize();
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    /// Calls a tool; panics on a JSON-RPC error or an `isError` result.
    fn call(&mut self, tool: &str, args: Value) -> Value {
        let response = self.request("tools/call", json!({"name": tool, "arguments": args}));
        let result = &response["result"];
        assert_eq!(result["isError"], false, "{tool} failed: {response}");
        result["structuredContent"].clone()
    }

    fn close(mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// Spawn → initialize response, `rounds` times; the floor is spawning `/bin/true` to exit.
fn cold_start(label: &str, vault: &Path, rounds: usize) -> Duration {
    let floor: Vec<Duration> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            Command::new("/bin/true").status().expect("spawn /bin/true");
            start.elapsed()
        })
        .collect();
    let floor = report("floor: spawn /bin/true and wait", floor, None);
    let samples: Vec<Duration> = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            let mut client = Client::spawn(vault);
            client.initialize();
            let elapsed = start.elapsed();
            client.close();
            elapsed
        })
        .collect();
    report(&format!("{label}: cold start → initialize"), samples, Some(floor))
}

fn round_trips(client: &mut Client, rounds: usize, mut one: impl FnMut(&mut Client, usize)) -> Vec<Duration> {
    for i in 0..rounds.min(10) {
        one(client, i);
    }
    (0..rounds)
        .map(|i| {
            let start = Instant::now();
            one(client, i);
            start.elapsed()
        })
        .collect()
}

/// Old and new binary on the same vault, interleaved call by call (so both see the same machine
/// state), each beside the MCP ping floor of its own server.
fn paired(baseline: &Path, root: &Path, rounds: usize) {
    let binaries = [("old", baseline), ("new", Path::new(BIN))];
    let mut starts: [Vec<Duration>; 2] = Default::default();
    for _ in 0..30 {
        for (slot, (_, binary)) in binaries.iter().enumerate() {
            let start = Instant::now();
            let mut client = Client::spawn_binary(binary, root);
            client.initialize();
            starts[slot].push(start.elapsed());
            client.close();
        }
    }
    for (slot, (name, _)) in binaries.iter().enumerate() {
        report(&format!("paired {name}: cold start → initialize"), std::mem::take(&mut starts[slot]), None);
    }
    let calls: [(&str, Value); 5] = [
        ("ping", Value::Null),
        ("get_server_info", json!({})),
        ("validate_memory_state", json!({})),
        ("ensure_sub_index", json!({"category": "03_Resources"})),
        ("search_vault_tool", json!({"query": "vault search", "search_mode": "fts", "max_results": 10})),
    ];
    lift_ingest_rate_limit(root);
    let mut clients: Vec<Client> = binaries.iter().map(|(_, binary)| Client::ready_binary(binary, root)).collect();
    for (tool, args) in calls {
        let mut samples: [Vec<Duration>; 2] = Default::default();
        for round in 0..rounds + 10 {
            for (slot, client) in clients.iter_mut().enumerate() {
                let start = Instant::now();
                if tool == "ping" {
                    drop(client.request("ping", json!({})));
                } else {
                    drop(client.call(tool, args.clone()));
                }
                if round >= 10 {
                    samples[slot].push(start.elapsed());
                }
            }
        }
        for (slot, (name, _)) in binaries.iter().enumerate() {
            report(&format!("paired {name}: {tool}"), std::mem::take(&mut samples[slot]), None);
        }
    }
    // Read after write: each server writes, then searches; old and new interleaved.
    {
        let [old_client, new_client] = &mut clients[..] else { unreachable!("two binaries") };
        let [floor, quiet, after] = read_after_write(&mut [old_client, new_client], rounds, "paired-raw");
        for (slot, (name, _)) in binaries.iter().enumerate() {
            let floor = report(&format!("paired {name}: floor: MCP ping (same rounds)"), floor[slot].clone(), None);
            let quiet = report(&format!("paired {name}: search_vault_tool, quiet"), quiet[slot].clone(), Some(floor));
            let after = report(&format!("paired {name}: search_vault_tool right after a write"), after[slot].clone(), Some(floor));
            println!("{:<46} read-after-write / quiet at p50: {:.2}x", "", after.as_secs_f64() / quiet.as_secs_f64().max(1e-9));
        }
    }
    // Writes: a new note per call through the whole transaction, old and new interleaved on
    // the same vault (each server catches up with the other's receipts under the writer lock),
    // next to the physical floor of one durable 4 KiB atomic replace in the same rounds.
    let mut samples: [Vec<Duration>; 3] = Default::default();
    let floor_dir = root.parent().unwrap_or(root).join(format!("paired-floor-{}", std::process::id()));
    std::fs::create_dir_all(&floor_dir).unwrap();
    for round in 0..rounds + 10 {
        // The order alternates by round, and its phase flips every 16 rounds: every 32nd write
        // (`search.tail_writes_max`) folds the journal's tail, and a fixed order (or a plain
        // alternation) would put every fold on the same binary.
        let reversed = (round + round / 16) % 2 == 1;
        let order: Vec<usize> = if reversed { (0..clients.len()).rev().collect() } else { (0..clients.len()).collect() };
        for slot in order {
            let client = &mut clients[slot];
            let name = format!("03_Resources/paired-{}-{round}", binaries[slot].0);
            let args = json!({"name": name, "note_type": "Resource", "title": format!("Paired {round}"),
                              "description": "A paired write", "content": format!("paired write {round}\n")});
            let start = Instant::now();
            let receipt = client.call("ingest_note", args);
            let took = start.elapsed();
            assert_eq!(receipt["status"], "ok", "{receipt}");
            if round >= 10 {
                samples[slot].push(took);
            }
        }
        let start = Instant::now();
        paravault::store::durable::replace(&floor_dir, &floor_dir.join(format!("floor-{}.md", round % 4)), &[b'x'; 4096]).unwrap();
        if round >= 10 {
            samples[2].push(start.elapsed());
        }
    }
    for (slot, name) in ["old", "new", "floor (durable 4 KiB replace)"].iter().enumerate() {
        report(&format!("paired {name}: ingest_note"), std::mem::take(&mut samples[slot]), None);
    }
    let _ = std::fs::remove_dir_all(&floor_dir);
    clients.into_iter().for_each(Client::close);
}

/// Read after write (issue 52), `rounds` rounds (after 10 unmeasured): each client a search
/// (untimed), an MCP ping (the floor) and the search again, with no write since the last one
/// (quiet); then each client an
/// `ingest_note` of a new note naming the query's words (not timed) and the same search again
/// (right after the write; with two clients on one vault the second also sees the first's
/// write, so their order alternates by round). Returns [floor, quiet, after], a list per client.
fn read_after_write(clients: &mut [&mut Client], rounds: usize, tag: &str) -> [Vec<Vec<Duration>>; 3] {
    let mut out: [Vec<Vec<Duration>>; 3] = std::array::from_fn(|_| vec![Vec::new(); clients.len()]);
    for round in 0..rounds + 10 {
        let query = QUERIES[round % QUERIES.len()];
        let search = json!({"query": query, "search_mode": "fts", "max_results": 10});
        let mut samples = vec![[Duration::ZERO; 3]; clients.len()];
        for (slot, client) in clients.iter_mut().enumerate() {
            // Untimed: the other client's write of the last round reaches this one here.
            drop(client.call("search_vault_tool", search.clone()));
            let start = Instant::now();
            drop(client.request("ping", json!({})));
            samples[slot][0] = start.elapsed();
            let start = Instant::now();
            drop(client.call("search_vault_tool", search.clone()));
            samples[slot][1] = start.elapsed();
        }
        let order: Vec<usize> = if round % 2 == 1 { (0..clients.len()).rev().collect() } else { (0..clients.len()).collect() };
        for slot in order {
            let client = &mut clients[slot];
            let args = json!({"name": format!("03_Resources/{tag}-{slot}-{round}"), "note_type": "Resource",
                              "title": format!("Read after write {round}"), "description": "A write before a search",
                              "content": format!("{} after write {round}\n", query.trim_matches('"'))});
            let receipt = client.call("ingest_note", args);
            assert_eq!(receipt["status"], "ok", "{receipt}");
            let start = Instant::now();
            let envelope = client.call("search_vault_tool", search.clone());
            samples[slot][2] = start.elapsed();
            assert_eq!(envelope["trust"], "untrusted");
        }
        if round >= 10 {
            for (slot, three) in samples.into_iter().enumerate() {
                for (list, sample) in out.iter_mut().zip(three) {
                    list[slot].push(sample);
                }
            }
        }
    }
    out
}

/// The benches' writes go past the default ingest rate limit: lift it for this vault (before
/// a server that writes starts).
fn lift_ingest_rate_limit(root: &Path) {
    let policy = root.join(".paravault/policy.yaml");
    if !policy.exists() {
        std::fs::create_dir_all(root.join(".paravault")).unwrap();
        std::fs::write(&policy, "rate_limits: {ingest_note: 1000000}\n").unwrap();
    }
}

fn in_process_search(vault: &Vault, query: &str) {
    std::hint::black_box(vault.search(&SearchParams::fts(query, 10)).expect("search"));
}

/// Issue 52's wide layout (`PARAVAULT_BENCH_LAYOUT=wide`): `n` notes, 40 per folder, all under
/// `03_Resources/topicN/`, after a full FTS sync. Each round, per server (old and new interleaved
/// when a baseline binary is given, their order alternating): a search (untimed, so the other
/// server's write reaches this one), an MCP ping, the same search with no write since (quiet),
/// `get_server_info`, an `ingest_note` of a new note in a new folder `03_Resources/topicM/` (the
/// folder made untimed before the call, M continuing the vault's numbering), the same search
/// right after that write; then an agent that reads an answer before it searches: a pause of
/// `READ_PAUSE` and the same search (its pair: a machine idle for a few milliseconds answers
/// slower whatever it answers); then a burst, two such writes one right after the other (the
/// second timed), the pause and the same search; then the floor, one durable 4 KiB replace.
/// How long the wide layout's reading agent takes between a write's answer and its next
/// search (a model reads an answer for far longer; the write's search state takes ~0.3 ms).
const READ_PAUSE: Duration = Duration::from_millis(5);

fn wide(n: usize, rounds: usize, baseline: Option<&Path>) {
    let root = support::fresh_wide_vault(n);
    let vault = Vault::open(&root, Default::default()).expect("open");
    let synced = vault.sync_vault(&SyncParams { allow_partial: true, ..Default::default() }).expect("sync");
    drop(vault);
    println!(
        "--- wide layout: {n} notes, {} per folder under 03_Resources ({} indexed)",
        support::WIDE_NOTES_PER_FOLDER,
        synced.counts.indexed
    );
    lift_ingest_rate_limit(&root);
    let mut binaries: Vec<(&str, &Path)> = Vec::new();
    if let Some(old) = baseline {
        binaries.push(("old", old));
    }
    binaries.push(("new", Path::new(BIN)));
    // `PARAVAULT_BENCH_VAULT_PER_BINARY=1`: each binary serves its own copy of the vault, for a
    // baseline whose catalog layout differs (on one vault each would rewrite the other's pages).
    let roots: Vec<std::path::PathBuf> = if std::env::var_os("PARAVAULT_BENCH_VAULT_PER_BINARY").is_some() && binaries.len() > 1 {
        binaries
            .iter()
            .map(|(name, _)| {
                let copy = root.with_file_name(format!("{}-{name}", root.file_name().unwrap().to_string_lossy()));
                let _ = std::fs::remove_dir_all(&copy);
                let status = Command::new("cp").arg("-a").arg(&root).arg(&copy).status().expect("cp");
                assert!(status.success(), "copying the vault for {name}");
                copy
            })
            .collect()
    } else {
        binaries.iter().map(|_| root.clone()).collect()
    };
    if roots.len() > 1 {
        // Each binary's copy starts from the engine state that binary writes (its persisted model,
        // catalogs and search generation), as a person's vault would: the state above was written
        // by this build, and an older binary may not read it (a foreign model copy is loaded whole
        // again at every write).
        for ((name, binary), copy) in binaries.iter().zip(&roots) {
            for args in [&["index"][..], &["sync", "--allow-partial"], &["lint"]] {
                let status = Command::new(binary)
                    .arg("--vault")
                    .arg(copy)
                    .args(args)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .env("PARAVAULT_STDIO_WATCHDOG", "0")
                    .status()
                    .expect("spawn paravault");
                // `lint` exits 1 when it has findings; anything else is a failure.
                assert!(status.code().is_some_and(|c| c <= 1), "{name}: paravault {args:?} failed on its copy: {status}");
            }
        }
    }
    let mut clients: Vec<Client> = binaries.iter().zip(&roots).map(|((_, binary), root)| Client::ready_binary(binary, root)).collect();
    // [ping, quiet search, get_server_info, ingest_note, search after the write, search a pause
    // after a search, search a pause after a write, ingest_note right after a write] per client.
    let mut samples: Vec<[Vec<Duration>; 8]> = binaries.iter().map(|_| Default::default()).collect();
    let mut floor = Vec::new();
    let floor_dir = root.parent().unwrap_or(&root).join(format!("wide-floor-{}", std::process::id()));
    std::fs::create_dir_all(&floor_dir).unwrap();
    let mut next_topic = n.div_ceil(support::WIDE_NOTES_PER_FOLDER);
    for round in 0..rounds + 10 {
        let query = QUERIES[round % QUERIES.len()];
        let search = json!({"query": query, "search_mode": "fts", "max_results": 10});
        let order: Vec<usize> = if round % 2 == 1 { (0..clients.len()).rev().collect() } else { (0..clients.len()).collect() };
        for slot in order {
            let client = &mut clients[slot];
            drop(client.call("search_vault_tool", search.clone()));
            let mut took = [Duration::ZERO; 8];
            let start = Instant::now();
            drop(client.request("ping", json!({})));
            took[0] = start.elapsed();
            let start = Instant::now();
            drop(client.call("search_vault_tool", search.clone()));
            took[1] = start.elapsed();
            let start = Instant::now();
            drop(client.call("get_server_info", json!({})));
            took[2] = start.elapsed();
            // A new note in a new folder `03_Resources/topicM/`, the folder made untimed first.
            let mut write_in_a_new_folder = |client: &mut Client, kind: &str| {
                let folder = format!("03_Resources/topic{next_topic}");
                next_topic += 1;
                std::fs::create_dir(roots[slot].join(&folder)).expect("make the new folder");
                let args = json!({"name": format!("{folder}/{kind}-{round}"), "note_type": "Resource",
                                  "title": format!("Wide write {round}"), "description": "A write in a new folder of a wide one",
                                  "content": format!("{} after a {kind} write {round}\n", query.trim_matches('"'))});
                let start = Instant::now();
                let receipt = client.call("ingest_note", args);
                let took = start.elapsed();
                assert_eq!(receipt["status"], "ok", "{receipt}");
                took
            };
            took[3] = write_in_a_new_folder(client, "wide");
            let start = Instant::now();
            let envelope = client.call("search_vault_tool", search.clone());
            took[4] = start.elapsed();
            assert_eq!(envelope["trust"], "untrusted");
            std::thread::sleep(READ_PAUSE);
            let start = Instant::now();
            let envelope = client.call("search_vault_tool", search.clone());
            took[5] = start.elapsed();
            assert_eq!(envelope["trust"], "untrusted");
            write_in_a_new_folder(client, "burst");
            took[7] = write_in_a_new_folder(client, "read");
            std::thread::sleep(READ_PAUSE);
            let start = Instant::now();
            let envelope = client.call("search_vault_tool", search.clone());
            took[6] = start.elapsed();
            assert_eq!(envelope["trust"], "untrusted");
            if round >= 10 {
                for (list, sample) in samples[slot].iter_mut().zip(took) {
                    list.push(sample);
                }
            }
        }
        let sample = support::stats::floor_sample(&floor_dir, round);
        if round >= 10 {
            floor.push(sample);
        }
    }
    let floor = report("floor: durable 4 KiB replace (same rounds)", floor, None);
    for (slot, (name, _)) in binaries.iter().enumerate() {
        let [ping, quiet, info, ingest, after, rested, paused, burst] = std::mem::take(&mut samples[slot]);
        let ping = report(&format!("wide {n} {name}: floor: MCP ping"), ping, None);
        report(&format!("wide {n} {name}: ingest_note, new folder"), ingest, Some(floor));
        report(&format!("wide {n} {name}: ingest_note right after a write"), burst, Some(floor));
        let quiet = report(&format!("wide {n} {name}: search_vault_tool, quiet"), quiet, Some(ping));
        let after = report(&format!("wide {n} {name}: search_vault_tool after a write"), after, Some(ping));
        println!("{:<52} read-after-write / quiet at p50: {:.2}x", "", after.as_secs_f64() / quiet.as_secs_f64().max(1e-9));
        let pause = READ_PAUSE.as_millis();
        let rested = report(&format!("wide {n} {name}: search_vault_tool {pause} ms after a search"), rested, Some(ping));
        let paused = report(&format!("wide {n} {name}: search_vault_tool {pause} ms after a write"), paused, Some(ping));
        println!(
            "{:<52} read {pause} ms after a write / after a search at p50: {:.2}x",
            "",
            paused.as_secs_f64() / rested.as_secs_f64().max(1e-9)
        );
        report(&format!("wide {n} {name}: get_server_info"), info, Some(ping));
    }
    let _ = std::fs::remove_dir_all(&floor_dir);
    clients.into_iter().for_each(Client::close);
    if std::env::var_os("PARAVAULT_BENCH_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&root);
        for copy in roots.iter().filter(|r| **r != root) {
            let _ = std::fs::remove_dir_all(copy);
        }
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let sizes: Vec<usize> = std::env::var("PARAVAULT_BENCH_NOTES")
        .unwrap_or_else(|_| support::DEFAULT_NOTES.to_string())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let rounds: usize = std::env::var("PARAVAULT_BENCH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
    println!("paravault mcp: {BIN}");
    if std::env::var("PARAVAULT_BENCH_LAYOUT").is_ok_and(|l| l == "wide") {
        let baseline = std::env::var_os("PARAVAULT_BENCH_BASELINE_BIN").map(std::path::PathBuf::from);
        for n in sizes {
            wide(n, rounds, baseline.as_deref());
        }
        return;
    }

    let empty = tempfile::tempdir().expect("tempdir");
    let status = Command::new(BIN).arg("--vault").arg(empty.path()).arg("init").stdout(Stdio::null()).status().expect("init");
    assert!(status.success());
    cold_start("initialised empty vault", empty.path(), 30);

    for n in sizes {
        let root = support::fresh_generated_vault(n);
        let vault = Vault::open(&root, Default::default()).expect("open");
        let synced = vault.sync_vault(&SyncParams { allow_partial: true, ..Default::default() }).expect("sync");
        println!("--- generated {n} notes ({} indexed)", synced.counts.indexed);
        cold_start(&format!("{n} notes"), &root, 30);
        lift_ingest_rate_limit(&root);

        let mut client = Client::ready(&root);
        let ping = report("floor: MCP ping round trip", round_trips(&mut client, rounds, |c, _| drop(c.request("ping", json!({})))), None);
        let info = round_trips(&mut client, rounds, |c, _| {
            let info = c.call("get_server_info", json!({}));
            assert_eq!(info["vault"]["indexed_notes"], synced.counts.indexed);
        });
        let info_bytes = client.last_bytes;
        report(&format!("{n} notes: get_server_info ({info_bytes} B)"), info, Some(ping));

        // In-process and over MCP, interleaved query by query, so both see the same machine state.
        // The server also writes the envelope serialised as the text block (the JSON of
        // structuredContent): `serialize` times that step alone on the envelope it returned.
        let (mut local, mut remote, mut serialize) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..rounds + 10 {
            let query = QUERIES[i % QUERIES.len()];
            let start = Instant::now();
            in_process_search(&vault, query);
            let in_process = start.elapsed();
            let start = Instant::now();
            let envelope = client.call("search_vault_tool", json!({"query": query, "search_mode": "fts", "max_results": 10}));
            let over_mcp = start.elapsed();
            assert_eq!(envelope["trust"], "untrusted");
            let start = Instant::now();
            std::hint::black_box(envelope.to_string());
            let text_block = start.elapsed();
            if i >= 10 {
                local.push(in_process);
                remote.push(over_mcp);
                serialize.push(text_block);
            }
        }
        let search_bytes = client.last_bytes;
        let in_process = report(&format!("{n} notes: search in-process (fts, top 10)"), local, None);
        let p50 = report(&format!("{n} notes: search_vault_tool (fts, top 10, {search_bytes} B)"), remote, Some(ping));
        println!("{:<46} MCP overhead over in-process search at p50: {:.3} ms", "", ms(p50.saturating_sub(in_process)));
        report(&format!("{n} notes: text block (envelope → JSON string)"), serialize, None);
        // Read after write (issue 52): an ingest_note, then the same search, timed on the search
        // only, beside the same search with no write since the last one (quiet), pair by pair.
        let [floor, quiet, after] = read_after_write(&mut [&mut client], rounds, "raw").map(|mut s| s.remove(0));
        let floor = report("floor: MCP ping round trip (same rounds)", floor, None);
        let quiet = report(&format!("{n} notes: search_vault_tool, quiet"), quiet, Some(floor));
        let after = report(&format!("{n} notes: search_vault_tool right after a write"), after, Some(floor));
        println!("{:<46} read-after-write / quiet at p50: {:.2}x", "", after.as_secs_f64() / quiet.as_secs_f64().max(1e-9));
        // The same reads while another process holds the writer lock (a long `sync --dense`):
        // they answer from the published generation and never wait (issue 46).
        {
            let _held = support::hold_writer_lock(&root);
            let searches = round_trips(&mut client, rounds, |c, i| {
                let envelope =
                    c.call("search_vault_tool", json!({"query": QUERIES[i % QUERIES.len()], "search_mode": "fts", "max_results": 10}));
                assert_eq!(envelope["trust"], "untrusted");
            });
            report(&format!("{n} notes: search_vault_tool, writer lock held"), searches, Some(ping));
            let infos = round_trips(&mut client, rounds, |c, _| drop(c.call("get_server_info", json!({}))));
            report(&format!("{n} notes: get_server_info, writer lock held"), infos, Some(ping));
        }
        client.close();

        // rot_audit: the first call in a fresh server loads the inventory (scan + parse).
        let mut client = Client::ready(&root);
        let start = Instant::now();
        let audit = client.call("rot_audit", json!({}));
        let first = start.elapsed();
        // The read-after-write rounds above each wrote one note.
        assert_eq!(audit["notes_audited"].as_u64(), Some((synced.counts.indexed + rounds + 10) as u64));
        println!(
            "{:<46} first call {:>8.1} ms  ({} B: {} redundant pairs, {} stale)",
            format!("{n} notes: rot_audit"),
            ms(first),
            client.last_bytes,
            audit["redundant"].as_array().map_or(0, Vec::len),
            audit["stale_freshness"].as_array().map_or(0, Vec::len)
        );
        let warm = round_trips(&mut client, 5, |c, _| drop(c.call("rot_audit", json!({}))));
        report(&format!("{n} notes: rot_audit warm"), warm, None);
        client.close();
        if let Some(baseline) = std::env::var_os("PARAVAULT_BENCH_BASELINE_BIN") {
            paired(Path::new(&baseline), &root, rounds);
        }
        drop(vault);
        let _ = std::fs::remove_dir_all(&root);
    }
}
