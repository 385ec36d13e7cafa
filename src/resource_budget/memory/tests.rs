use std::collections::HashMap;

use std::path::PathBuf;

use super::*;
use crate::error::RuntimeErrorKind;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

const ROOT_MOUNT: &str = "25 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw";
const V2_MOUNT: &str = "30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime \
                        shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot";
const V1_CPU_MOUNT: &str = "34 30 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:12 \
                            - cgroup cgroup rw,cpu,cpuacct";
const V1_MEMORY_MOUNT: &str = "35 30 0:30 / /sys/fs/cgroup/memory rw,nosuid shared:13 \
                               - cgroup cgroup rw,memory";
const HYBRID_V2_MOUNT: &str = "31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid shared:5 \
                               - cgroup2 cgroup2 rw,nsdelegate";
const MEMINFO: &str = "MemTotal:       16314932 kB\nMemFree:         1000000 kB\n";
const MEMINFO_BYTES: u64 = 16_314_932 * 1024;

/// An in-memory file system; `unreadable` paths fail like a permission
/// error.
#[derive(Debug, Default)]
struct FixtureView {
    files: HashMap<PathBuf, String>,
    unreadable: Vec<PathBuf>,
}

impl FixtureView {
    fn with(mut self, path: &str, contents: &str) -> Self {
        self.files.insert(PathBuf::from(path), contents.to_owned());
        self
    }

    fn mounts(self, lines: &[&str]) -> Self {
        self.with(PROC_SELF_MOUNTINFO, &lines.join("\n"))
    }

    fn unreadable(mut self, path: &str) -> Self {
        self.unreadable.push(PathBuf::from(path));
        self
    }
}

impl MemoryFileView for FixtureView {
    fn read_optional(&self, path: &Path) -> RuntimeResult<Option<String>> {
        if self.unreadable.iter().any(|p| p == path) {
            let error = io::Error::new(io::ErrorKind::PermissionDenied, "fixture");
            return Err(RuntimeError::io(DETECT, error));
        }
        Ok(self.files.get(path).cloned())
    }
}

fn detect(view: &FixtureView) -> RuntimeResult<ProcessMemoryLimit> {
    ProcessMemoryLimit::detect_from(None, view)
}

fn detected(view: &FixtureView) -> ProcessMemoryLimit {
    detect(view).expect("detection succeeds")
}

fn from_env(value: &str, view: &FixtureView) -> ProcessMemoryLimit {
    ProcessMemoryLimit::detect_from(Some(value.into()), view).expect("valid value")
}

fn limit(bytes: u64, source: MemoryLimitSource) -> ProcessMemoryLimit {
    ProcessMemoryLimit::discovered(bytes, source)
}

fn assert_error(result: RuntimeResult<ProcessMemoryLimit>, kind: RuntimeErrorKind) {
    let error = result.expect_err("detection must fail");
    assert_eq!(error.kind(), kind);
    assert_eq!(error.operation(), DETECT);
}

fn v2_host() -> FixtureView {
    FixtureView::default()
        .with(PROC_SELF_CGROUP, "0::/a/b/c\n")
        .mounts(&[ROOT_MOUNT, V2_MOUNT])
        .with(PROC_MEMINFO, MEMINFO)
}

fn v1_host() -> FixtureView {
    FixtureView::default()
        .with(
            PROC_SELF_CGROUP,
            "12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n",
        )
        .mounts(&[ROOT_MOUNT, V1_CPU_MOUNT, V1_MEMORY_MOUNT])
        .with(PROC_MEMINFO, MEMINFO)
}

fn hybrid_host(v2: &str, v1: &str) -> FixtureView {
    FixtureView::default()
        .with(
            PROC_SELF_CGROUP,
            "12:memory:/svc\n1:name=systemd:/svc\n0::/svc\n",
        )
        .mounts(&[ROOT_MOUNT, V1_MEMORY_MOUNT, HYBRID_V2_MOUNT])
        .with("/sys/fs/cgroup/unified/svc/memory.max", v2)
        .with("/sys/fs/cgroup/memory/svc/memory.limit_in_bytes", v1)
        .with(PROC_MEMINFO, MEMINFO)
}

#[test]
fn source_labels_are_stable() {
    let cases = [
        (MemoryLimitSource::Configured, "configured"),
        (MemoryLimitSource::Environment, "environment"),
        (MemoryLimitSource::CgroupV2, "cgroup-v2"),
        (MemoryLimitSource::CgroupV1, "cgroup-v1"),
        (
            MemoryLimitSource::HostPhysicalMemory,
            "host-physical-memory",
        ),
    ];
    for (source, label) in cases {
        assert_eq!(source.as_str(), label);
        assert_eq!(source.to_string(), label);
    }
}

#[test]
fn cgroup_v2_smallest_limit_along_the_path_wins_and_max_is_ignored() {
    let view = v2_host()
        .with("/sys/fs/cgroup/memory.max", "max\n")
        .with("/sys/fs/cgroup/a/memory.max", "1073741824\n")
        .with("/sys/fs/cgroup/a/b/memory.max", "max\n")
        .with("/sys/fs/cgroup/a/b/c/memory.max", "2147483648\n")
        .with("/sys/fs/cgroup/other/memory.max", "1024\n");
    assert_eq!(detected(&view), limit(GIB, MemoryLimitSource::CgroupV2));

    let deeper = v2_host()
        .with("/sys/fs/cgroup/a/memory.max", "2147483648")
        .with("/sys/fs/cgroup/a/b/c/memory.max", "536870912");
    assert_eq!(
        detected(&deeper),
        limit(512 * MIB, MemoryLimitSource::CgroupV2)
    );
}

#[test]
fn cgroup_v2_without_finite_limits_falls_back_to_host_memory() {
    let view = v2_host()
        .with("/sys/fs/cgroup/a/memory.max", "max")
        .with("/sys/fs/cgroup/a/b/c/memory.max", "max\n");
    assert_eq!(
        detected(&view),
        limit(MEMINFO_BYTES, MemoryLimitSource::HostPhysicalMemory)
    );
}

#[test]
fn cgroup_v2_membership_is_relative_to_the_mount_root() {
    // A container: the mount shows the cgroup `/kubepods/pod1` at
    // /sys/fs/cgroup, so only `c` below it and the mount point are read.
    let mount = "40 25 0:26 /kubepods/pod1 /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw";
    let view = FixtureView::default()
        .with(PROC_SELF_CGROUP, "0::/kubepods/pod1/c\n")
        .mounts(&[ROOT_MOUNT, mount])
        .with("/sys/fs/cgroup/memory.max", "805306368\n")
        .with("/sys/fs/cgroup/c/memory.max", "max\n")
        .with("/sys/fs/cgroup/kubepods/pod1/memory.max", "1024\n")
        .with(PROC_MEMINFO, MEMINFO);
    assert_eq!(
        detected(&view),
        limit(768 * MIB, MemoryLimitSource::CgroupV2)
    );

    // Membership equal to the mount root: only the mount point is read.
    let own = FixtureView::default()
        .with(PROC_SELF_CGROUP, "0::/kubepods/pod1\n")
        .mounts(&[mount])
        .with("/sys/fs/cgroup/memory.max", "805306368\n");
    assert_eq!(
        detected(&own),
        limit(768 * MIB, MemoryLimitSource::CgroupV2)
    );
}

#[test]
fn cgroup_v2_mount_with_the_widest_view_is_used() {
    let narrow = "41 25 0:26 /a/b /mnt/narrow rw - cgroup2 cgroup2 rw";
    let view = v2_host()
        .mounts(&[narrow, V2_MOUNT])
        .with("/sys/fs/cgroup/a/memory.max", "4096\n")
        .with("/mnt/narrow/c/memory.max", "8192\n");
    assert_eq!(detected(&view), limit(4096, MemoryLimitSource::CgroupV2));
}

#[test]
fn cgroup_membership_outside_every_mount_is_not_read() {
    let sibling = "40 25 0:26 /other /sys/fs/cgroup rw - cgroup2 cgroup2 rw";
    let view = FixtureView::default()
        .with(PROC_SELF_CGROUP, "0::/mine\n")
        .mounts(&[sibling])
        .with("/sys/fs/cgroup/memory.max", "4096\n")
        .with(PROC_MEMINFO, MEMINFO);
    assert_eq!(
        detected(&view),
        limit(MEMINFO_BYTES, MemoryLimitSource::HostPhysicalMemory)
    );

    let escaped = view.with(PROC_SELF_CGROUP, "0::/../mine\n");
    assert_eq!(
        detected(&escaped),
        limit(MEMINFO_BYTES, MemoryLimitSource::HostPhysicalMemory)
    );
}

#[test]
fn cgroup_v1_unlimited_marker_is_ignored() {
    let view = v1_host()
        .with(
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "9223372036854771712\n",
        )
        .with(
            "/sys/fs/cgroup/memory/docker/memory.limit_in_bytes",
            "536870912\n",
        )
        .with(
            "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
            "9223372036854775807\n",
        );
    assert_eq!(
        detected(&view),
        limit(512 * MIB, MemoryLimitSource::CgroupV1)
    );
}

#[test]
fn cgroup_v1_unlimited_floor_is_exact() {
    let at_floor = v1_host().with(
        "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
        &CGROUP_V1_UNLIMITED_FLOOR.to_string(),
    );
    assert_eq!(
        detected(&at_floor).source(),
        MemoryLimitSource::HostPhysicalMemory
    );
    let below = CGROUP_V1_UNLIMITED_FLOOR - 1;
    let below_floor = v1_host().with(
        "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
        &below.to_string(),
    );
    assert_eq!(
        detected(&below_floor),
        limit(below, MemoryLimitSource::CgroupV1)
    );
}

#[test]
fn cgroup_v1_memory_controller_may_share_a_hierarchy() {
    let mount = "35 30 0:30 / /sys/fs/cgroup/memory,blkio rw - cgroup cgroup rw,blkio,memory";
    let view = FixtureView::default()
        .with(PROC_SELF_CGROUP, "7:blkio,memory:/job\n")
        .mounts(&[V1_CPU_MOUNT, mount])
        .with(
            "/sys/fs/cgroup/memory,blkio/job/memory.limit_in_bytes",
            "1048576\n",
        );
    assert_eq!(detected(&view), limit(MIB, MemoryLimitSource::CgroupV1));
}

#[test]
fn hybrid_reports_the_smaller_hierarchy() {
    let v1_wins = hybrid_host("max\n", "268435456\n");
    assert_eq!(
        detected(&v1_wins),
        limit(256 * MIB, MemoryLimitSource::CgroupV1)
    );
    let v2_wins = hybrid_host("134217728\n", "268435456\n");
    assert_eq!(
        detected(&v2_wins),
        limit(128 * MIB, MemoryLimitSource::CgroupV2)
    );
    let v1_smaller = hybrid_host("268435456\n", "134217728\n");
    assert_eq!(
        detected(&v1_smaller),
        limit(128 * MIB, MemoryLimitSource::CgroupV1)
    );
    let tie = hybrid_host("134217728\n", "134217728\n");
    assert_eq!(
        detected(&tie),
        limit(128 * MIB, MemoryLimitSource::CgroupV2)
    );
    let neither = hybrid_host("max\n", "9223372036854771712\n");
    assert_eq!(
        detected(&neither),
        limit(MEMINFO_BYTES, MemoryLimitSource::HostPhysicalMemory)
    );
}

#[test]
fn environment_overrides_every_file() {
    let view = v2_host().with("/sys/fs/cgroup/a/memory.max", "4096\n");
    assert_eq!(
        from_env("1073741824", &view),
        limit(GIB, MemoryLimitSource::Environment)
    );
    assert_eq!(
        from_env(" 1048576\n", &view),
        limit(1 << 20, MemoryLimitSource::Environment)
    );

    // The environment is consulted before any file is read.
    let broken = FixtureView::default().unreadable(PROC_SELF_CGROUP);
    assert_eq!(
        from_env("1073741824", &broken),
        limit(GIB, MemoryLimitSource::Environment)
    );
}

/// The specification's rule: `ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES` accepts
/// any positive integer, however small.
#[test]
fn environment_limit_accepts_any_positive_integer() {
    let view = v2_host();
    for bytes in [1, 512, (1 << 20) - 1, u64::MAX] {
        assert_eq!(
            from_env(&bytes.to_string(), &view),
            limit(bytes, MemoryLimitSource::Environment)
        );
    }
}

#[test]
fn invalid_environment_value_is_a_configuration_error() {
    let view = v2_host();
    for value in [
        "",
        "  ",
        "0",
        "-1",
        "abc",
        "1.5",
        "1 GiB",
        "18446744073709551616",
    ] {
        let result = ProcessMemoryLimit::detect_from(Some(value.into()), &view);
        let error = result.as_ref().expect_err("refused").clone();
        assert_error(result, RuntimeErrorKind::Configuration);
        let Some(crate::error::RuntimeErrorContext::Environment(violation)) = error.context()
        else {
            panic!("no environment context: {error:?}");
        };
        assert_eq!(violation.variable(), PROCESS_MEMORY_LIMIT_ENV);
        assert_eq!(violation.value(), value.escape_debug().to_string());
        assert!(
            violation
                .to_string()
                .contains("a positive whole number of bytes"),
            "{violation}"
        );
    }
}

#[test]
fn malformed_cgroup_files_are_skipped() {
    let cgroup = "garbage\n::\n:memory\nx:memory:/bad\n0::relative\n\n0::/a/b/c\n";
    let mountinfo = [
        "",
        "not a mountinfo line",
        "1 2 3 - cgroup2",
        "1 2 0:1 / /x rw - cgroup2",
        "1 2 0:1 /\\9 /x rw - cgroup2 cgroup2 rw",
        "1 2 0:1 / /x\\04 rw - cgroup2 cgroup2 rw",
        V2_MOUNT,
    ];
    let view = FixtureView::default()
        .with(PROC_SELF_CGROUP, cgroup)
        .mounts(&mountinfo)
        .with("/sys/fs/cgroup/a/memory.max", "4096\n");
    assert_eq!(detected(&view), limit(4096, MemoryLimitSource::CgroupV2));
}

#[test]
fn malformed_limit_files_are_ignored() {
    for contents in [
        "",
        "\n",
        "garbage",
        "0",
        "-1",
        "12 34",
        "99999999999999999999",
        "MAX",
    ] {
        let view = v2_host()
            .with("/sys/fs/cgroup/a/memory.max", contents)
            .with("/sys/fs/cgroup/a/b/memory.max", "8192\n");
        assert_eq!(
            detected(&view),
            limit(8192, MemoryLimitSource::CgroupV2),
            "{contents:?}"
        );
        let v1 = v1_host().with(
            "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes",
            contents,
        );
        assert_eq!(
            detected(&v1),
            limit(MEMINFO_BYTES, MemoryLimitSource::HostPhysicalMemory),
            "{contents:?}"
        );
    }
}

#[test]
fn parsers_never_panic_on_odd_input() {
    let inputs = [
        "",
        "\\",
        "\\0",
        "\\04",
        "\\777",
        "\\400 - cgroup2 a b",
        "1 2 3 4 5 6 - ",
        " - - - - - - - ",
        "0:",
        "0::",
        "0::/",
        "ü:memory:/ä",
        "MemTotal:",
        "MemTotal: kB",
        "MemTotal: 18446744073709551615 kB",
        "\u{0}\u{1}",
    ];
    for input in inputs {
        let _ = parse_cgroup_membership(input);
        let _ = parse_mountinfo_line(input);
        let _ = unescape_mountinfo(input);
        let _ = cgroup_components(input);
        let _ = parse_cgroup_v1_limit(input);
        let _ = parse_cgroup_v2_limit(input);
        let _ = parse_meminfo_total(input);
        let view = FixtureView::default()
            .with(PROC_SELF_CGROUP, input)
            .with(PROC_SELF_MOUNTINFO, input)
            .with(PROC_MEMINFO, input);
        let _ = detect(&view);
    }
}

#[test]
fn mountinfo_escapes_are_decoded() {
    let line = "50 25 0:26 / /run/my\\040cgroup rw shared:9 - cgroup2 none rw";
    let mount = parse_mountinfo_line(line).expect("valid line");
    assert_eq!(mount.mount_point, PathBuf::from("/run/my cgroup"));
    assert_eq!(mount.root, "/");
    assert!(mount.is_cgroup_v2());
    assert_eq!(
        unescape_mountinfo("a\\134b\\011"),
        Some("a\\b\t".to_owned())
    );
    assert_eq!(unescape_mountinfo("\\400"), None);
}

#[test]
fn host_memory_is_the_fallback() {
    let view = FixtureView::default().with(PROC_MEMINFO, MEMINFO);
    assert_eq!(
        detected(&view),
        limit(MEMINFO_BYTES, MemoryLimitSource::HostPhysicalMemory)
    );
    // cgroup membership without a cgroup mount also falls back.
    let unmounted = view.with(PROC_SELF_CGROUP, "0::/a\n").mounts(&[ROOT_MOUNT]);
    assert_eq!(
        detected(&unmounted),
        limit(MEMINFO_BYTES, MemoryLimitSource::HostPhysicalMemory)
    );
    let later = FixtureView::default().with(PROC_MEMINFO, "MemFree: 1 kB\nMemTotal: 2 kB\n");
    assert_eq!(
        detected(&later),
        limit(2048, MemoryLimitSource::HostPhysicalMemory)
    );
}

#[test]
fn nothing_finite_is_unsupported() {
    assert_error(
        detect(&FixtureView::default()),
        RuntimeErrorKind::Unsupported,
    );
    for meminfo in [
        "",
        "MemTotal: 0 kB",
        "MemTotal: 12 MB",
        "MemTotal: 12",
        "MemTotal: 12 kB extra",
        "MemTotal: 18446744073709551615 kB",
        "MemFree: 12 kB",
    ] {
        let view = v2_host()
            .with("/sys/fs/cgroup/a/memory.max", "max\n")
            .with(PROC_MEMINFO, meminfo);
        assert_error(detect(&view), RuntimeErrorKind::Unsupported);
    }
}

/// What an owner outside Linux does with an unset variable: an unknown
/// limit and a permissive managed budget, not an error; other errors
/// stay errors.
#[test]
fn an_unsupported_detection_falls_back_to_an_unknown_limit() {
    let unknown =
        ProcessMemoryLimit::or_unknown(detect(&FixtureView::default())).expect("falls back");
    assert_eq!(
        (unknown.bytes(), unknown.source()),
        (u64::MAX, MemoryLimitSource::Unknown)
    );
    let budget = ManagedMemoryBudget::resolve(unknown, None, ManagedMemoryPolicy::default())
        .expect("permissive");
    assert_eq!(budget.managed_bytes(), u64::MAX);
    let unreadable = FixtureView::default().unreadable(PROC_SELF_CGROUP);
    assert_error(
        ProcessMemoryLimit::or_unknown(detect(&unreadable)),
        RuntimeErrorKind::Io,
    );
    let refused = ProcessMemoryLimit::detect_from(Some("0".into()), &FixtureView::default());
    assert_error(
        ProcessMemoryLimit::or_unknown(refused),
        RuntimeErrorKind::Configuration,
    );
}

#[test]
fn unreadable_files_stop_detection() {
    for path in [
        PROC_SELF_CGROUP,
        PROC_SELF_MOUNTINFO,
        "/sys/fs/cgroup/a/b/memory.max",
        PROC_MEMINFO,
    ] {
        let view = v2_host().unreadable(path);
        assert_error(detect(&view), RuntimeErrorKind::Io);
    }
}

#[test]
fn host_view_reads_real_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("memory.max");
    std::fs::write(&file, "max\n").expect("write fixture");
    let view = HostMemoryFileView;
    let read = |path: &Path| view.read_optional(path).expect("readable or missing");
    assert_eq!(read(&file), Some("max\n".to_owned()));
    assert_eq!(read(&dir.path().join("missing")), None);
    assert_eq!(
        read(&file.join("below-a-file")),
        None,
        "a path through a regular file does not exist"
    );
    let error = view
        .read_optional(dir.path())
        .expect_err("a directory is unreadable");
    assert_eq!(error.kind(), RuntimeErrorKind::Io);
    assert_eq!(error.operation(), DETECT);
}

#[test]
fn real_detection_reports_a_positive_limit_or_a_labelled_error() {
    match ProcessMemoryLimit::detect() {
        Ok(limit) => assert!(limit.bytes() > 0),
        Err(error) => assert_eq!(error.operation(), DETECT),
    }
}
