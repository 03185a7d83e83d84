//! `heapdiff serve` against a hostile file system and hostile clients, on
//! dumps of a real program run under the shim (`serve_growth.c`):
//!
//! - a dump, or its directory, swapped for a link out of the served
//!   directory after the scan is refused by `/view` and `/pprof`;
//! - links to `.` and `..` inside the directory list each dump once;
//! - error pages and the list name dumps by id, never by a server path;
//! - a flood of clients that never finish their headers, under a low
//!   descriptor limit, does not keep a normal client out; the flood's
//!   connections are closed (to make room, then by the header timeout);
//!   a request naming another host (DNS rebinding) is refused;
//! - 2,000 dumps, many clients listing at once and clients that leave
//!   before their answer: every listing answers with every dump, requests
//!   whose clients left cost no scan and no view each (counted with
//!   inotify: directory and dump opens), the next request is served.

mod serve_common;

use heapsample_tests::*;
use serve_common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::Duration;

/// The ids the server on `port` lists, sorted.
fn listed_ids(port: u16) -> Vec<String> {
    let (status, body) = get_at(port, "/api/dumps");
    assert_eq!(status, 200, "{body}");
    let listing: serde_json::Value = serde_json::from_str(&body).expect("JSON listing");
    let mut ids: Vec<String> = listing["processes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["dumps"].as_array().unwrap().iter())
        .map(|d| d["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

/// A real dump of the growth program (its exit dump).
fn growth_dump(run: &Outcome) -> std::path::PathBuf {
    run.final_dump().0.path
}

#[test]
fn links_swapped_in_after_the_scan_are_refused() {
    let run = run_growth();
    let dump = growth_dump(&run);
    let served = TempDir::new("serve-swap-served");
    let outside = TempDir::new("serve-swap-outside");
    for dir in [served.path(), outside.path()] {
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::copy(&dump, dir.join("top.prof")).unwrap();
        std::fs::copy(&dump, dir.join("sub/inner.prof")).unwrap();
    }
    let server = Server::start(&[served.path()]);
    assert_eq!(listed_ids(server.port), ["sub/inner.prof", "top.prof"]);
    let requests = [
        "/view?dump=top.prof",
        "/pprof/top.prof",
        "/view?dump=sub/inner.prof",
        "/pprof/sub/inner.prof",
    ];
    for path in requests {
        assert_eq!(server.get(path).0, 200, "{path} before the swap");
    }
    // The dump swapped for an absolute link, its directory for a relative
    // one, both to copies outside.
    let root = served.path();
    std::fs::rename(root.join("top.prof"), root.join(".top.prof.old")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("top.prof"), root.join("top.prof")).unwrap();
    std::fs::rename(root.join("sub"), root.join(".sub.old")).unwrap();
    let relative = Path::new("..")
        .join(outside.path().file_name().unwrap())
        .join("sub");
    std::os::unix::fs::symlink(&relative, root.join("sub")).unwrap();
    assert!(root.join("sub/inner.prof").is_file(), "the link works");
    for path in requests {
        let (status, body) = server.get(path);
        assert_eq!(status, 403, "{path}: {body}");
        assert!(
            body.contains("leads out of the served directories"),
            "{path}: {body}"
        );
        assert!(!body.contains(&*outside.path().to_string_lossy()), "{body}");
    }
    // The next listing no longer shows them.
    assert!(listed_ids(server.port).is_empty());
}

#[test]
fn links_to_dot_and_dot_dot_list_each_dump_once() {
    let run = run_growth();
    let dump = growth_dump(&run);
    let served = TempDir::new("serve-loops");
    let root = served.path();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::copy(&dump, root.join("top.prof")).unwrap();
    std::fs::copy(&dump, root.join("a/b/deep.prof")).unwrap();
    for i in 0..24 {
        std::os::unix::fs::symlink(".", root.join(format!("l{i}"))).unwrap();
        std::os::unix::fs::symlink("..", root.join(format!("a/up{i}"))).unwrap();
        std::os::unix::fs::symlink("../..", root.join(format!("a/b/top{i}"))).unwrap();
    }
    let server = Server::start(&[root]);
    let counter = OpenCounter::new(root);
    assert_eq!(listed_ids(server.port), ["a/b/deep.prof", "top.prof"]);
    // One scan reads each directory once, whatever links lead to it (each
    // of the 24 links used to be walked again, 4 levels deep).
    let (root_opens, files) = counter.take();
    assert_eq!(
        root_opens, 1,
        "the directory read once by the listing's scan"
    );
    assert_eq!(files.get("a"), Some(&1), "{files:?}");
}

#[test]
fn error_pages_name_no_server_path() {
    let run = run_growth();
    let served = TempDir::new("serve-errors");
    let root = served.path();
    std::fs::write(
        root.join("corrupt.prof"),
        [b"HEAPSMPL".as_slice(), &[0xff; 64]].concat(),
    )
    .unwrap();
    std::fs::copy(growth_dump(&run), root.join("vanishing.prof")).unwrap();
    let server = Server::start(&[root]);
    let (status, listing) = server.get("/api/dumps");
    assert_eq!(status, 200);
    std::fs::remove_file(root.join("vanishing.prof")).unwrap();
    let absolute = root.to_string_lossy().into_owned();
    let name = root.file_name().unwrap().to_string_lossy().into_owned();
    let pages = [
        ("/view?dump=corrupt.prof", 422, "corrupt.prof"),
        ("/pprof/corrupt.prof", 422, "corrupt.prof"),
        (
            "/view?dump=vanishing.prof",
            404,
            "vanishing.prof: no longer exists",
        ),
        ("/view?dump=absent.prof", 404, "absent.prof"),
    ];
    for (path, expected, says) in pages {
        let (status, body) = server.get(path);
        assert_eq!(status, expected, "{path}: {body}");
        assert!(body.contains(says), "{path}: {body}");
        assert_eq!(body.trim_end().lines().count(), 1, "one line: {body}");
        assert!(
            !body.contains(&absolute) && !body.contains(&name),
            "{path}: {body}"
        );
    }
    assert!(listing.contains("corrupt.prof"), "{listing}");
    assert!(
        !listing.contains(&absolute) && !listing.contains(&name),
        "{listing}"
    );
}

/// Connections that sent part of a request's headers and nothing more.
fn slow_clients(port: u16, count: usize) -> Vec<TcpStream> {
    (0..count)
        .map(|_| {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            stream
                .write_all(b"GET /api/dumps HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                .expect("send part of the headers");
            stream
        })
        .collect()
}

/// True if the server closed `stream` (end of stream or reset), waiting at
/// most `wait`.
fn closed_by_server(mut stream: &TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

#[test]
fn a_slow_client_flood_and_other_hosts_do_not_keep_a_normal_client_out() {
    let run = run_growth();
    let names = dump_names(&run);
    // 256 descriptors: the flood outnumbers them, as 21,000 clients do the
    // default limit.
    let server = Server::start_with(&[run.dir.path()], |command| {
        // SAFETY: setrlimit is async-signal-safe and touches only the
        // child's limits, between fork and exec.
        unsafe {
            command.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 256,
                    rlim_max: 256,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let flood = slow_clients(server.port, 600);
    assert_eq!(listed_ids(server.port), names, "a normal client is served");
    let host = |name: &str| {
        server.raw(&format!(
            "GET /api/dumps HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n"
        ))
    };
    let (status, body) = host(&format!("rebound.example:{}", server.port));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("--allow-host"), "{body}");
    assert!(!body.contains(".prof"), "{body}");
    assert_eq!(host(&format!("localhost:{}", server.port)).0, 200);
    let (status, _) = server.raw(
        "GET http://rebound.example/api/dumps HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, 403, "a name in an absolute URL");
    // The oldest of the flood were closed to make room at once, the rest
    // by the header timeout.
    let pushed_out = flood
        .iter()
        .filter(|stream| closed_by_server(stream, Duration::from_millis(1)))
        .count();
    assert!(pushed_out >= 400, "only {pushed_out} of 600 closed");
    for stream in &flood {
        assert!(
            closed_by_server(stream, Duration::from_secs(60)),
            "a connection that never finished its headers stayed open"
        );
    }
    let mut server = server;
    assert!(server.alive());
}

/// inotify on one directory: how often it and its files were opened.
struct OpenCounter {
    fd: libc::c_int,
}

impl OpenCounter {
    fn new(dir: &Path) -> OpenCounter {
        // SAFETY: plain system calls on a descriptor this struct owns; the
        // path is a NUL-terminated copy.
        unsafe {
            let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
            assert!(fd >= 0, "inotify_init1");
            let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
            assert!(libc::inotify_add_watch(fd, path.as_ptr(), libc::IN_OPEN) >= 0);
            OpenCounter { fd }
        }
    }

    /// Opens since the last call: (of the directory itself, of each file).
    fn take(&self) -> (usize, std::collections::HashMap<String, usize>) {
        let (mut directory, mut files) = (0, std::collections::HashMap::new());
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            // SAFETY: reads into a buffer of the length given.
            let read = unsafe { libc::read(self.fd, buffer.as_mut_ptr().cast(), buffer.len()) };
            if read <= 0 {
                return (directory, files);
            }
            let mut at = 0;
            while at < read as usize {
                let header = std::mem::size_of::<libc::inotify_event>();
                // SAFETY: the kernel wrote whole events; read_unaligned
                // copies the header out of the byte buffer.
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(buffer[at..].as_ptr().cast()) };
                let name = &buffer[at + header..at + header + event.len as usize];
                let name = String::from_utf8_lossy(name)
                    .trim_end_matches('\0')
                    .to_string();
                if name.is_empty() {
                    directory += 1;
                } else {
                    *files.entry(name).or_default() += 1;
                }
                at += header + event.len as usize;
            }
        }
    }
}

impl Drop for OpenCounter {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor this struct owns.
        unsafe { libc::close(self.fd) };
    }
}

/// Send every request on a connection of its own, wait `hold` (the server
/// has them in hand), then leave without reading an answer.
fn send_then_leave(port: u16, requests: &[String], hold: Duration) {
    let streams: Vec<TcpStream> = requests
        .iter()
        .map(|request| {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            stream.write_all(request.as_bytes()).expect("send");
            stream
        })
        .collect();
    std::thread::sleep(hold);
    for stream in streams {
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }
}

#[test]
fn two_thousand_dumps_many_clients_and_clients_that_leave() {
    const DUMPS: usize = 2000;
    let run = run_growth();
    let sources: Vec<_> = dump_names(&run)
        .iter()
        .map(|name| run.dir.path().join(name))
        .collect();
    let served = TempDir::new("serve-load");
    for i in 0..DUMPS {
        std::fs::copy(
            &sources[i % sources.len()],
            served.path().join(format!("d{i:04}.prof")),
        )
        .unwrap();
    }
    let server = Server::start(&[served.path()]);
    let counter = OpenCounter::new(served.path());

    // Many clients listing at once: every one gets every dump.
    let threads: Vec<_> = (0..32)
        .map(|_| {
            let port = server.port;
            std::thread::spawn(move || (0..4).map(|_| listed_ids(port).len()).collect::<Vec<_>>())
        })
        .collect();
    for thread in threads {
        assert_eq!(thread.join().unwrap(), [DUMPS; 4]);
    }
    let _ = counter.take();

    // Clients that leave before their answer: 200 listings, then views of
    // 100 dumps, each group held for 50 ms.
    let listings = vec!["GET /api/dumps HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_string(); 200];
    send_then_leave(server.port, &listings, Duration::from_millis(50));
    let views: Vec<String> = (0..100)
        .map(|i| format!("GET /view?dump=d{i:04}.prof HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
        .collect();
    send_then_leave(server.port, &views, Duration::from_millis(50));
    // The next client is served, with every dump and a whole view.
    assert_eq!(listed_ids(server.port).len(), DUMPS);
    let (status, page) = server.get("/view?dump=d1999.prof");
    assert_eq!(status, 200);
    assert!(page.contains("grow_cache"), "a whole view");
    // Work still queued for clients that left would go on after that:
    // count until the server has opened nothing for a second.
    let (mut scans, mut files) = counter.take();
    for _ in 0..60 {
        std::thread::sleep(Duration::from_secs(1));
        let (more_scans, more_files) = counter.take();
        if more_scans == 0 && more_files.is_empty() {
            break;
        }
        scans += more_scans;
        for (name, opens) in more_files {
            *files.entry(name).or_default() += opens;
        }
    }
    let views_built = (0..100)
        .filter(|i| files.contains_key(&format!("d{i:04}.prof")))
        .count();
    // Each listing used to rescan under one lock (200 scans), and each
    // view to be built for nobody (100 views).
    eprintln!("{scans} scans, {views_built} abandoned views built");
    assert!(scans < 100, "{scans} scans for 201 listings");
    assert!(
        views_built < 50,
        "{views_built} of 100 abandoned views built"
    );
}
