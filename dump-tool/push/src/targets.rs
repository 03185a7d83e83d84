//! The receivers and what each is sent for one dump:
//!
//! - Pyroscope (`POST /ingest`, its HTTP ingest API): the gzipped pprof
//!   profile heapdiff writes (`format=pprof`), the application named by the
//!   executable's file name with the labels `{host=…,pid=…,container=…}`,
//!   `from` and `until` the dump's second.
//! - An OpenTelemetry Collector's OTLP/HTTP receiver (`POST
//!   /v1development/profiles`, protobuf, gzip `Content-Encoding` as OTLP/HTTP
//!   allows: 6.7 MB become 0.67 MB on a 65,536-stack dump):
//!   [`crate::otlp_profile`].
//!
//! Sample types as Go's heap profiles: `alloc_objects/count`,
//! `alloc_space/bytes`, `inuse_objects/count`, `inuse_space/bytes`, period
//! type `space/bytes`, period the sampling period.

use crate::origin::Origin;
use crate::otlp_profile::export_request;
use crate::queue::Header;
use flate2::Compression;
use flate2::write::GzEncoder;
use heapdiff::render::pprof::PbProfile;
use prost::Message;
use std::io::Write;
use url::Url;

/// The OTLP/HTTP path of the profiles signal (its `v1development` status).
pub const OTLP_PATH: &str = "/v1development/profiles";

/// The development version of the OTLP profiles messages sent, declared
/// in the header collectors check (`OTLP-Profiles-Development-Version`;
/// a collector expecting another version refuses with 400, and says so).
pub const OTLP_DEVELOPMENT_VERSION: (&str, &str) = ("OTLP-Profiles-Development-Version", "1");

/// A receiver.
#[derive(Clone, Debug)]
pub struct Target {
    /// `pyroscope` or `otlp`: the queue's name for it.
    pub name: &'static str,
    /// Where requests are posted (the query is each request's own).
    pub url: Url,
    /// The user's headers on every request (`--header`: a tenant's
    /// `X-Scope-OrgID`, an `Authorization` for a proxy in front).
    pub extra_headers: Vec<(String, String)>,
}

impl Target {
    /// Pyroscope at its base URL (`http://host:4040`, or a path prefix);
    /// requests go to `…/ingest`.
    pub fn pyroscope(base: &str) -> Result<Target, String> {
        let mut url = http_url(base)?;
        if !url.path().ends_with("/ingest") {
            let path = format!("{}/ingest", url.path().trim_end_matches('/'));
            url.set_path(&path);
        }
        Ok(Target {
            name: "pyroscope",
            url,
            extra_headers: Vec::new(),
        })
    }

    /// An OTLP/HTTP receiver: its base URL (`http://host:4318`), or, with a
    /// path, the whole endpoint as `OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT`
    /// gives it.
    pub fn otlp(base: &str) -> Result<Target, String> {
        let mut url = http_url(base)?;
        if url.path() == "/" || url.path().is_empty() {
            url.set_path(OTLP_PATH);
        }
        Ok(Target {
            name: "otlp",
            url,
            extra_headers: Vec::new(),
        })
    }

    /// The request for the profile of one dump.
    pub fn request(
        &self,
        profile: &PbProfile,
        origin: &Origin,
        dump: &str,
        key: &str,
    ) -> (Header, Vec<u8>) {
        let (query, content_type, body) = match self.name {
            "pyroscope" => (
                pyroscope_query(origin),
                "application/octet-stream",
                gzipped(&profile.encode_to_vec()),
            ),
            _ => (
                String::new(),
                "application/x-protobuf",
                gzipped(&export_request(profile, origin).encode_to_vec()),
            ),
        };
        let header = Header {
            key: key.to_string(),
            dump: dump.to_string(),
            target: self.name.to_string(),
            query,
            content_type: content_type.to_string(),
        };
        (header, body)
    }

    /// The headers of each request besides its content type: the
    /// protocol's, then the user's.
    pub fn headers(&self) -> Vec<(&str, &str)> {
        let protocol: &[(&str, &str)] = match self.name {
            "otlp" => &[OTLP_DEVELOPMENT_VERSION, ("Content-Encoding", "gzip")],
            _ => &[],
        };
        let user = self.extra_headers.iter();
        protocol
            .iter()
            .copied()
            .chain(user.map(|(name, value)| (name.as_str(), value.as_str())))
            .collect()
    }

    /// With the user's headers, each `NAME: VALUE` (`--header`).
    pub fn with_headers(mut self, headers: &[String]) -> Result<Target, String> {
        for header in headers {
            let (name, value) = header
                .split_once(':')
                .map(|(name, value)| (name.trim(), value.trim()))
                .filter(|(name, _)| !name.is_empty())
                .ok_or_else(|| format!("--header {header:?}: expected NAME: VALUE"))?;
            let valid_name = hyper::header::HeaderName::from_bytes(name.as_bytes()).is_ok();
            let valid_value = hyper::header::HeaderValue::from_str(value).is_ok();
            if !valid_name || !valid_value {
                return Err(format!("--header {header:?}: not a valid HTTP header"));
            }
            self.extra_headers
                .push((name.to_string(), value.to_string()));
        }
        Ok(self)
    }

    /// The URL of a queued request.
    pub fn url_with(&self, query: &str) -> Url {
        let mut url = self.url.clone();
        if !query.is_empty() {
            url.set_query(Some(query));
        }
        url
    }
}

fn http_url(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| format!("{text}: not a URL: {e}"))?;
    match url.scheme() {
        "http" if url.host_str().is_some() => Ok(url),
        "http" => Err(format!("{text}: no host")),
        scheme => Err(format!(
            "{text}: {scheme}:// is not supported (plain http://; put a TLS proxy beside the receiver)"
        )),
    }
}

/// `name=APP{host=…,pid=…,container=…}&from=S&until=S&format=pprof`.
pub fn pyroscope_query(origin: &Origin) -> String {
    let labels: Vec<String> = origin
        .labels()
        .into_iter()
        .map(|(key, value)| format!("{key}={}", label_value(&value)))
        .collect();
    let name = format!(
        "{}{{{}}}",
        label_value(&origin.application),
        labels.join(",")
    );
    let second = (origin.time_unix_ns / 1_000_000_000).to_string();
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("name", &name)
        .append_pair("from", &second)
        .append_pair("until", &second)
        .append_pair("format", "pprof")
        .finish()
}

/// A value safe inside Pyroscope's `app{k=v,…}` syntax: `{`, `}`, `,`, `=`
/// and spaces become `_`.
fn label_value(value: &str) -> String {
    value
        .chars()
        .map(|c| {
            if matches!(c, '{' | '}' | ',' | '=' | ' ' | '"') {
                '_'
            } else {
                c
            }
        })
        .collect()
}

fn gzipped(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(bytes);
    encoder.finish().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_each_engines_conventions() {
        let p = Target::pyroscope("http://pyro:4040").unwrap();
        assert_eq!(p.url.as_str(), "http://pyro:4040/ingest");
        let p = Target::pyroscope("http://gw/pyroscope/").unwrap();
        assert_eq!(p.url.as_str(), "http://gw/pyroscope/ingest");
        let o = Target::otlp("http://otel:4318").unwrap();
        assert_eq!(o.url.as_str(), "http://otel:4318/v1development/profiles");
        let o = Target::otlp("http://otel:4318/custom/profiles").unwrap();
        assert_eq!(o.url.path(), "/custom/profiles");
        assert!(
            Target::otlp("https://otel:4318")
                .unwrap_err()
                .contains("TLS proxy")
        );
        assert!(Target::pyroscope("pyro:4040").is_err());
    }

    #[test]
    fn the_application_name_carries_its_labels() {
        let origin = Origin {
            application: "my svc".into(),
            executable: "/usr/bin/my svc".into(),
            host: "web-1".into(),
            pid: 42,
            container: None,
            time_unix_ns: 1_700_000_000_900_000_000,
            seq: 3,
        };
        let query = pyroscope_query(&origin);
        assert_eq!(
            query,
            "name=my_svc%7Bhost%3Dweb-1%2Cpid%3D42%7D&from=1700000000&until=1700000000&format=pprof"
        );
    }
}
