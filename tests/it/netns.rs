//! Network namespaces for multi-replica runs (`replication_netns`, `benches/contention.rs`):
//! one namespace per replica joined by a veth pair to the remote's namespace, where `git daemon
//! --enable=receive-pack` serves bare repositories over `git://`. Traffic stays between the
//! namespaces a run creates; all are removed when the [`Net`] is dropped. Needs root (or
//! CAP_NET_ADMIN), iproute2 and git: without them it fails saying so.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("`{program}` cannot be run ({e}): this test needs iproute2 and git"))
}

pub fn must(program: &str, args: &[&str]) {
    let out = run(program, args);
    assert!(
        out.status.success(),
        "`{program} {}` failed: {}\nthis test needs root (CAP_NET_ADMIN) and iproute2 (`ip`, `tc`)",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The namespaces, links and `git daemon` of one run; all removed when dropped.
pub struct Net {
    prefix: String,
    daemon: Option<Child>,
    /// Whether each replica's link is cut (on its side).
    pub cut: Vec<bool>,
}

impl Net {
    pub fn remote_ns(&self) -> String {
        format!("{}g", self.prefix)
    }

    pub fn ns(&self, i: usize) -> String {
        format!("{}r{i}", self.prefix)
    }

    /// The remote's side of replica `i`'s link, and the replica's side.
    pub fn links(&self, i: usize) -> (String, String) {
        (format!("{}a{i}", self.prefix), format!("{}b{i}", self.prefix))
    }

    /// `replicas` namespaces (at most 250), each joined to the remote's by a veth pair, and
    /// `git daemon --enable=receive-pack` serving `base` in the remote's.
    pub fn start(base: &Path, replicas: usize) -> Net {
        assert!(replicas <= 250, "at most 250 replicas (one /24 each)");
        // Unique per run, so two runs in one test process (tests run in parallel) never share a
        // namespace or link name (interface names stay within 15 bytes: `pv12345n0a19`).
        static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let prefix = format!("pv{}n{run}", std::process::id() % 100_000);
        let mut net = Net { prefix, daemon: None, cut: vec![false; replicas] };
        let remote = net.remote_ns();
        must("ip", &["netns", "add", &remote]);
        must("ip", &["-n", &remote, "link", "set", "lo", "up"]);
        for i in 0..net.cut.len() {
            let (a, b) = net.links(i);
            let ns = net.ns(i);
            must("ip", &["netns", "add", &ns]);
            must("ip", &["-n", &ns, "link", "set", "lo", "up"]);
            must("ip", &["link", "add", &a, "type", "veth", "peer", "name", &b]);
            must("ip", &["link", "set", &a, "netns", &remote]);
            must("ip", &["link", "set", &b, "netns", &ns]);
            must("ip", &["-n", &remote, "addr", "add", &format!("10.200.{i}.1/24"), "dev", &a]);
            must("ip", &["-n", &remote, "link", "set", &a, "up"]);
            must("ip", &["-n", &ns, "addr", "add", &format!("10.200.{i}.2/24"), "dev", &b]);
            must("ip", &["-n", &ns, "link", "set", &b, "up"]);
        }
        let base_path = format!("--base-path={}", base.display());
        let daemon = Command::new("ip")
            .args([
                "netns",
                "exec",
                &remote,
                "git",
                "daemon",
                "--reuseaddr",
                "--export-all",
                "--enable=receive-pack",
                "--informative-errors",
            ])
            .arg(&base_path)
            .arg(base)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("git daemon");
        net.daemon = Some(daemon);
        // Served once every replica can list the remote.
        let deadline = Instant::now() + Duration::from_secs(20);
        for i in 0..net.cut.len() {
            loop {
                let listed = net.exec(i, "git").args(["ls-remote", &net.url(i)]).output().unwrap();
                if listed.status.success() {
                    break;
                }
                assert!(Instant::now() < deadline, "git daemon never answered: {}", String::from_utf8_lossy(&listed.stderr));
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        net
    }

    /// The remote as replica `i` reaches it (its own link).
    pub fn url(&self, i: usize) -> String {
        format!("git://10.200.{i}.1/remote.git")
    }

    /// `program` run inside replica `i`'s namespace (`ip netns exec` execs it: its pid is the
    /// program's, so a kill reaches it).
    pub fn exec(&self, i: usize, program: &str) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.ns(i), program]);
        command
    }

    /// Cuts (or restores) replica `i`'s link on its own side: its calls fail at once.
    pub fn set_link(&mut self, i: usize, up: bool) {
        let (_, b) = self.links(i);
        must("ip", &["-n", &self.ns(i), "link", "set", &b, if up { "up" } else { "down" }]);
        if up {
            // The route goes with the link; it comes back with the address.
            let _ = run("ip", &["-n", &self.ns(i), "route", "replace", &format!("10.200.{i}.0/24"), "dev", &b]);
        }
        self.cut[i] = !up;
    }

    /// Cuts (or restores) the remote's side of replica `i`'s link: a connection in flight
    /// hangs until git's timeout stops it.
    pub fn set_remote_side(&self, i: usize, up: bool) {
        let (a, _) = self.links(i);
        must("ip", &["-n", &self.remote_ns(), "link", "set", &a, if up { "up" } else { "down" }]);
        if up {
            let _ = run("ip", &["-n", &self.remote_ns(), "route", "replace", &format!("10.200.{i}.0/24"), "dev", &a]);
        }
    }

    /// Loss and delay on replica `i`'s link (`tc netem`), or none. A kernel built without
    /// netem (this one's: "Specified qdisc kind is unknown") gets a slow, queueing link instead
    /// (`tbf`: 256 kbit/s, packets past 200 ms of queue dropped), and the run says so.
    pub fn netem(&self, i: usize, on: bool) -> &'static str {
        let (_, b) = self.links(i);
        if on {
            let ns = self.ns(i);
            let netem = ["netns", "exec", &ns, "tc", "qdisc", "replace", "dev", &b, "root", "netem", "delay", "40ms", "20ms", "loss", "5%"];
            let out = run("ip", &netem);
            if out.status.success() {
                return "netem: 40±20 ms delay, 5% loss";
            }
            assert!(String::from_utf8_lossy(&out.stderr).contains("qdisc kind is unknown"), "tc: {}", String::from_utf8_lossy(&out.stderr));
            must(
                "ip",
                &[
                    "netns", "exec", &ns, "tc", "qdisc", "replace", "dev", &b, "root", "tbf", "rate", "256kbit", "burst", "16kbit",
                    "latency", "200ms",
                ],
            );
            return "tbf (this kernel has no netem): 256 kbit/s, drops past 200 ms of queue";
        } else {
            let _ = run("ip", &["netns", "exec", &self.ns(i), "tc", "qdisc", "del", "dev", &b, "root"]);
        }
        "none"
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        if let Some(mut daemon) = self.daemon.take() {
            let _ = daemon.kill();
            let _ = daemon.wait();
        }
        // git daemon forks a child per connection; the namespace's processes go with it.
        let pids = String::from_utf8_lossy(&run("ip", &["netns", "pids", &self.remote_ns()]).stdout).into_owned();
        for pid in pids.lines().map(str::trim).filter(|p| !p.is_empty()) {
            let _ = run("kill", &["-9", pid]);
        }
        for i in 0..self.cut.len() {
            let _ = run("ip", &["netns", "del", &self.ns(i)]);
        }
        let _ = run("ip", &["netns", "del", &self.remote_ns()]);
    }
}
