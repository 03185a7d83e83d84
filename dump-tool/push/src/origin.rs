//! Where a dump came from, as the engines name it: the application (the
//! executable's file name), the host, the pid and the container, read from
//! the dump alone (dump format 5's process context), and the identity that
//! tells one dump from every other (so a dump renamed, moved or copied is
//! still sent once: [`dump_key`]).

use heapsample_format::Dump;

/// The dump's origin and identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The executable's file name (`service.name`, Pyroscope's app name).
    pub application: String,
    pub executable: String,
    /// Empty when the dump does not say (before format 5).
    pub host: String,
    pub pid: u32,
    /// The container's id (64 hex digits) from the cgroup path, if any.
    pub container: Option<String>,
    pub time_unix_ns: u64,
    pub seq: u64,
}

impl Origin {
    pub fn of(dump: &Dump) -> Origin {
        let application = dump
            .executable
            .rsplit('/')
            .next()
            .filter(|name| !name.is_empty())
            .unwrap_or("unknown")
            .to_string();
        Origin {
            application,
            executable: dump.executable.clone(),
            host: dump.context.hostname.clone(),
            pid: dump.pid,
            container: container_id(&dump.context.cgroup),
            time_unix_ns: dump.time_unix_ns,
            seq: dump.seq,
        }
    }

    /// The labels every engine gets: `host`, `pid` and `container` (when
    /// known), in that order.
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        let mut labels = Vec::new();
        if !self.host.is_empty() {
            labels.push(("host", self.host.clone()));
        }
        labels.push(("pid", self.pid.to_string()));
        if let Some(container) = &self.container {
            labels.push(("container", container.clone()));
        }
        labels
    }
}

/// One dump's identity: its process (pid and the profiler's start on the
/// wall clock), sequence number and moment. A file name is not one: dumps
/// are renamed when brought home from a container, and copied between
/// machines.
pub fn dump_key(pid: u32, start_unix_ns: u64, seq: u64, time_unix_ns: u64) -> String {
    format!("{pid}-{start_unix_ns}-{seq}-{time_unix_ns}")
}

/// The container id a cgroup path names: the last segment holding 64 hex
/// digits (`/docker/ID`, `…/docker-ID.scope`, `…/cri-containerd-ID.scope`,
/// `…/crio-ID.scope`, Kubernetes' `kubepods…/pod…/ID`).
pub fn container_id(cgroup: &str) -> Option<String> {
    cgroup.rsplit('/').find_map(|segment| {
        let segment = segment.strip_suffix(".scope").unwrap_or(segment);
        let id = segment.rsplit(['-', ':']).next()?;
        (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids_are_found_in_the_runtimes_cgroup_paths() {
        let id = "0123456789abcdef".repeat(4);
        for path in [
            format!("/docker/{id}"),
            format!("/system.slice/docker-{id}.scope"),
            format!("/kubepods.slice/kubepods-pod1.slice/cri-containerd-{id}.scope"),
            format!("/kubepods/burstable/pod1/{id}"),
            format!("/machine.slice/libpod-{id}.scope/container"),
        ] {
            assert_eq!(container_id(&path).as_deref(), Some(id.as_str()), "{path}");
        }
        assert_eq!(
            container_id("/user.slice/user-1000.slice/session-2.scope"),
            None
        );
        assert_eq!(container_id("/"), None);
    }
}
