//! A real Redis server for the caches' tests, started as the emulators are: in its own process
//! group, on a free loopback port, killed as soon as the test process is gone. Debian's
//! `redis-server` (`.ci/run` installs it where it is missing).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running Redis server, stopped when dropped.
#[derive(Debug)]
pub struct Redis {
    /// The loopback port it listens on.
    pub port: u16,
    child: Child,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }
}

impl Redis {
    /// Starts a Redis server on a free loopback port, keeping nothing on disk.
    pub fn start() -> Result<Redis, String> {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("no free port: {e}"))?;
        Redis::start_on(port)
    }

    /// Starts a Redis server on `port` (to restart one where its clients expect it).
    pub fn start_on(port: u16) -> Result<Redis, String> {
        let server = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .ok_or("redis-server is not installed (Debian's package redis-server)")?;
        // The server runs in this shell's process group, which the shell kills as soon as the
        // test process is gone.
        let script = format!(
            "'{server}' --port {port} --bind 127.0.0.1 --save '' --appendonly no \
             --protected-mode no >/dev/null 2>&1 &\n\
             while kill -0 \"$TEST_PID\" 2>/dev/null; do sleep 0.5; done\n\
             kill -9 -$$"
        );
        let child = Command::new("setsid")
            .args(["sh", "-c", &script])
            .env("TEST_PID", std::process::id().to_string())
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start redis-server: {e}"))?;
        let redis = Redis { port, child };
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if redis.command(&["PING"]).is_ok_and(|r| r == "+PONG") {
                return Ok(redis);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "redis-server did not answer on port {port} within 10 s"
        ))
    }

    /// Its URL, as `GlobalCache::redis` and python-ndb's `REDIS_CACHE_URL` take it.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Sends one command (arguments as bytes) and returns the first line of the answer, or the
    /// bulk string that follows it (`$-1` for none).
    pub fn command(&self, args: &[&str]) -> Result<String, String> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.raw(&args)
            .map(|reply| String::from_utf8_lossy(&reply).into_owned())
    }

    /// Sends one command and returns its answer: a simple or bulk string's bytes, or the
    /// reply line as it came (`:1`, `$-1`, `-ERR ...`).
    pub fn raw(&self, args: &[&[u8]]) -> Result<Vec<u8>, String> {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let mut stream = TcpStream::connect_timeout(&address, Duration::from_millis(200))
            .map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .map_err(|e| e.to_string())?;
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            request.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            request.extend_from_slice(arg);
            request.extend_from_slice(b"\r\n");
        }
        stream.write_all(&request).map_err(|e| e.to_string())?;
        let mut reply = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            let n = stream.read(&mut buffer).map_err(|e| e.to_string())?;
            if n == 0 {
                break;
            }
            reply.extend_from_slice(&buffer[..n]);
            if let Some(parsed) = parse(&reply) {
                return Ok(parsed);
            }
        }
        Err("the connection closed before a whole answer".to_owned())
    }
}

/// A whole reply: a bulk string's bytes, or the reply's first line.
fn parse(reply: &[u8]) -> Option<Vec<u8>> {
    let end = reply.windows(2).position(|w| w == b"\r\n")?;
    let line = &reply[..end];
    if line.first() != Some(&b'$') || line == b"$-1" {
        return Some(line.to_vec());
    }
    let len: usize = std::str::from_utf8(&line[1..]).ok()?.parse().ok()?;
    let body = reply.get(end + 2..end + 2 + len)?;
    Some(body.to_vec())
}
