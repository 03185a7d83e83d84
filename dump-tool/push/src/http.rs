//! One HTTP/1.1 POST to a receiver (hyper's client connection over a
//! tokio TCP stream, one connection per request), bounded in time as a
//! whole, and its outcome as the pusher acts on it: taken (2xx), refused
//! for good (4xx but 408 and 429: sending it again would be refused
//! again), or to retry (connection failures, timeouts, 408, 429, 5xx).
//! Plain `http://` only: TLS is left to a proxy beside the receiver.

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Request, header};
use hyper_util::rt::TokioIo;
use std::time::Duration;
use url::Url;

/// What became of a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Taken,
    /// Not to be sent again; why, in words.
    Refused(String),
    /// To be sent again later; why, in words.
    Retry(String),
}

/// The most of a refusal's body quoted in a message.
const QUOTED: usize = 200;

/// POST `body` to `url` within `timeout`, with `headers` besides the
/// content type.
pub async fn post(
    url: &Url,
    content_type: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
    timeout: Duration,
) -> Outcome {
    match tokio::time::timeout(timeout, exchange(url, content_type, headers, body)).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::Retry(format!("no answer within {}", humanized(timeout))),
    }
}

async fn exchange(
    url: &Url,
    content_type: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Outcome {
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return Outcome::Refused("the URL names no host".into());
    };
    let stream = match tokio::net::TcpStream::connect((host, port)).await {
        Ok(stream) => stream,
        Err(e) => return Outcome::Retry(format!("cannot connect: {e}")),
    };
    let (mut sender, connection) =
        match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await {
            Ok(pair) => pair,
            Err(e) => return Outcome::Retry(e.to_string()),
        };
    let connection = tokio::spawn(connection);
    let mut target = url.path().to_string();
    if let Some(query) = url.query() {
        target.push('?');
        target.push_str(query);
    }
    let authority = match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    };
    let mut request = Request::post(target);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .header(header::HOST, authority)
        .header(header::CONTENT_TYPE, content_type)
        .header(
            header::USER_AGENT,
            concat!("heapdiff/", env!("CARGO_PKG_VERSION")),
        )
        .body(Full::new(Bytes::from(body)));
    let request = match request {
        Ok(request) => request,
        Err(e) => return Outcome::Refused(e.to_string()),
    };
    let outcome = match sender.send_request(request).await {
        Err(e) => Outcome::Retry(e.to_string()),
        Ok(response) => {
            let status = response.status();
            let text = match Limited::new(response.into_body(), 64 << 10).collect().await {
                Ok(body) => String::from_utf8_lossy(&body.to_bytes()).into_owned(),
                Err(_) => String::new(),
            };
            judged(status, format!("{status}{}", quoted(&text)))
        }
    };
    connection.abort();
    outcome
}

/// What an answer with `status` means for its request.
fn judged(status: hyper::StatusCode, why: String) -> Outcome {
    if status.is_success() {
        Outcome::Taken
    } else if status.is_client_error() && status != 408 && status != 429 {
        Outcome::Refused(why)
    } else {
        Outcome::Retry(why)
    }
}

/// `: the first line of text`, cut, or nothing.
fn quoted(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if line.is_empty() {
        return String::new();
    }
    let cut: String = line.chars().take(QUOTED).collect();
    format!(": {cut}")
}

/// `1.5 s`, `30 s`.
pub fn humanized(duration: Duration) -> String {
    let seconds = duration.as_secs_f64();
    if seconds.fract() == 0.0 {
        format!("{seconds:.0} s")
    } else {
        format!("{seconds:.1} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::StatusCode;

    #[test]
    fn refusals_are_final_and_busy_or_failing_receivers_retried() {
        let judge = |code: u16| judged(StatusCode::from_u16(code).unwrap(), String::new());
        for code in [200, 202, 204] {
            assert_eq!(judge(code), Outcome::Taken, "{code}");
        }
        for code in [400, 401, 403, 404, 413, 415, 422] {
            assert_eq!(judge(code), Outcome::Refused(String::new()), "{code}");
        }
        for code in [408, 429, 500, 502, 503, 504] {
            assert_eq!(judge(code), Outcome::Retry(String::new()), "{code}");
        }
        // 3xx: not followed; tried again later (a misconfigured URL says so
        // in its line each time).
        assert_eq!(judge(301), Outcome::Retry(String::new()));
    }

    #[test]
    fn a_refusals_body_is_quoted_by_its_first_line_cut() {
        assert_eq!(quoted(""), "");
        assert_eq!(quoted("\n  bad profile \nmore"), ": bad profile");
        assert_eq!(quoted(&"x".repeat(500)).len(), 2 + QUOTED);
    }
}
