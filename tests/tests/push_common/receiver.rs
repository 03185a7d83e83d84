//! A tiny real HTTP/1.1 receiver (std `TcpListener`, one thread): records
//! every request that arrives and answers as told (taken, refused, failing,
//! or never), on a port it keeps across restarts.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How the receiver answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// 200 OK.
    Take,
    /// 400, with a body saying why.
    Refuse,
    /// 503.
    Fail,
    /// Reads the request, never answers (holds the connection).
    Hang,
}

/// One request as it arrived.
#[derive(Clone, Debug)]
pub struct Arrival {
    pub path: String,
    pub query: HashMap<String, String>,
    pub content_type: String,
    /// Every header, names in lower case.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    /// What it was answered.
    pub answer: Answer,
}

pub struct Receiver {
    pub port: u16,
    answer: Arc<Mutex<Answer>>,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Listening on a free port.
    pub fn start(answer: Answer) -> Receiver {
        Receiver::listen(0, answer, Arc::default())
    }

    fn listen(port: u16, answer: Answer, arrivals: Arc<Mutex<Vec<Arrival>>>) -> Receiver {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the receiver");
        let port = listener.local_addr().unwrap().port();
        let answer = Arc::new(Mutex::new(answer));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (answer, arrivals, stop) = (answer.clone(), arrivals.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    let now = *answer.lock().unwrap();
                    if let Some(stream) = serve(stream, now, &arrivals) {
                        held.push(stream);
                    }
                }
            })
        };
        Receiver {
            port,
            answer,
            arrivals,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn answer(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    pub fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().unwrap().clone()
    }

    /// The requests answered 200 on `path`.
    pub fn taken(&self, path: &str) -> Vec<Arrival> {
        self.arrivals()
            .into_iter()
            .filter(|a| a.answer == Answer::Take && a.path == path)
            .collect()
    }

    /// Stop listening (connections are then refused), keeping what arrived.
    pub fn stop(mut self) -> (u16, Arc<Mutex<Vec<Arrival>>>) {
        self.shut();
        (self.port, self.arrivals.clone())
    }

    /// Listen again on the same port, with what arrived before.
    pub fn restart(port: u16, arrivals: Arc<Mutex<Vec<Arrival>>>, answer: Answer) -> Receiver {
        Receiver::listen(port, answer, arrivals)
    }

    fn shut(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.shut();
    }
}

/// Read one request, record it, answer it; the stream itself when it is
/// to be held unanswered.
fn serve(stream: TcpStream, answer: Answer, arrivals: &Mutex<Vec<Arrival>>) -> Option<TcpStream> {
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let target = line.split_whitespace().nth(1)?.to_string();
    let mut length = 0usize;
    let mut content_type = String::new();
    let mut headers = HashMap::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers.insert(name.to_ascii_lowercase(), value.trim().to_string());
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().ok()?,
            "content-type" => content_type = value.trim().to_string(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    arrivals.lock().unwrap().push(Arrival {
        path: path.to_string(),
        query: decode_query(query),
        content_type,
        headers,
        body,
        answer,
    });
    let reply: &[u8] = match answer {
        Answer::Take => b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        Answer::Refuse => {
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 20\r\nConnection: close\r\n\r\nprofile not accepted"
        }
        Answer::Fail => {
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        }
        Answer::Hang => return Some(stream),
    };
    let mut stream = stream;
    let _ = stream.write_all(reply);
    None
}

/// `a=b&c=%7Bd%7D` decoded (`+` as space, `%XX` as its byte).
fn decode_query(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (unescape(key), unescape(value))
        })
        .collect()
}

fn unescape(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 2;
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}
