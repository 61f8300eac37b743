//! A loopback TCP proxy of the harness's own, between a client and an emulator, that injects
//! the network's faults on command: delay, reset every live connection, refuse new ones,
//! swallow traffic (a black hole), or swallow only the answers (a request that arrives and
//! whose reply is lost). Loopback only; every connection's task ends with the proxy.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What the proxy does to the traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Passes everything.
    None,
    /// Holds every chunk this long before passing it.
    Delay(Duration),
    /// Accepts new connections and resets them at once (a server that is down).
    Refuse,
    /// Passes nothing, either way (a black hole).
    Swallow,
    /// Passes requests, drops every answer (the request is served, its reply lost).
    SwallowAnswers,
}

#[derive(Default)]
struct State {
    fault: Option<Fault>,
    /// Each live connection's client socket (to reset it) and its tasks.
    live: Vec<(Arc<TcpStream>, Vec<JoinHandle<()>>)>,
    accepted: usize,
}

/// The proxy: `127.0.0.1:port` forwards to `127.0.0.1:target`.
pub struct FaultProxy {
    /// Where clients connect.
    pub port: u16,
    state: Arc<Mutex<State>>,
    acceptor: JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.acceptor.abort();
        self.reset_all();
    }
}

impl FaultProxy {
    /// A proxy to `target` on a free loopback port, passing everything.
    pub async fn start(target: u16) -> FaultProxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let acceptor = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let fault = {
                    let mut s = shared.lock().unwrap();
                    s.accepted += 1;
                    s.fault.unwrap_or(Fault::None)
                };
                if fault == Fault::Refuse {
                    let _ = client.set_zero_linger();
                    drop(client);
                    continue;
                }
                let Ok(server) =
                    TcpStream::connect(SocketAddr::from((Ipv4Addr::LOCALHOST, target))).await
                else {
                    continue;
                };
                let client = Arc::new(client);
                let server = Arc::new(server);
                let up = tokio::spawn(pump(client.clone(), server.clone(), shared.clone(), false));
                let down = tokio::spawn(pump(server.clone(), client.clone(), shared.clone(), true));
                shared.lock().unwrap().live.push((client, vec![up, down]));
            }
        });
        FaultProxy {
            port,
            state,
            acceptor,
        }
    }

    /// The proxy's address, as an endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Injects `fault` from now on, into live connections too.
    pub fn set(&self, fault: Fault) {
        self.state.lock().unwrap().fault = Some(fault);
    }

    /// Resets every live connection (RST, as a crashed peer or a middlebox does).
    pub fn reset_all(&self) {
        let live = std::mem::take(&mut self.state.lock().unwrap().live);
        for (client, tasks) in live {
            let _ = client.set_zero_linger();
            for task in tasks {
                task.abort();
            }
        }
    }

    /// How many connections the proxy has accepted.
    pub fn accepted(&self) -> usize {
        self.state.lock().unwrap().accepted
    }
}

/// Copies `from` to `to` under the current fault; `answers` for the server → client direction.
async fn pump(from: Arc<TcpStream>, to: Arc<TcpStream>, state: Arc<Mutex<State>>, answers: bool) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        if from.readable().await.is_err() {
            return;
        }
        let n = match from.try_read(&mut buffer) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(_) => return,
        };
        let fault = state.lock().unwrap().fault.unwrap_or(Fault::None);
        match fault {
            Fault::Swallow => continue,
            Fault::SwallowAnswers if answers => continue,
            Fault::Delay(d) => tokio::time::sleep(d).await,
            _ => {}
        }
        let mut chunk = &buffer[..n];
        while !chunk.is_empty() {
            if to.writable().await.is_err() {
                return;
            }
            match to.try_write(chunk) {
                Ok(written) => chunk = &chunk[written..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(_) => return,
            }
        }
    }
}
