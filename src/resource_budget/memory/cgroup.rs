//! What the kernel says about the process's memory: its cgroup membership
//! (`/proc/self/cgroup`), the cgroup mounts (`/proc/self/mountinfo`), the
//! v2 and v1 limit files along the membership path, and host memory
//! (`/proc/meminfo`). Parsers skip malformed lines; an existing file that
//! cannot be read is an error.

use std::path::{Path, PathBuf};

use super::{MemoryFileView, MemoryLimitSource, ProcessMemoryLimit};
use crate::error::RuntimeResult;

pub(super) const PROC_SELF_CGROUP: &str = "/proc/self/cgroup";
pub(super) const PROC_SELF_MOUNTINFO: &str = "/proc/self/mountinfo";
pub(super) const CGROUP_V2_LIMIT_FILE: &str = "memory.max";
pub(super) const CGROUP_V1_LIMIT_FILE: &str = "memory.limit_in_bytes";
/// cgroup v1 reports "no limit" as a page-aligned `i64::MAX`.
pub(super) const CGROUP_V1_UNLIMITED_FLOOR: u64 = 0x7FFF_FFFF_FFFF_F000;

// ---------------------------------------------------------------------------
// cgroups
// ---------------------------------------------------------------------------

/// The process's membership paths from `/proc/self/cgroup`.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct CgroupMembership {
    /// The unified (v2) hierarchy path, from the `0::/path` line.
    v2: Option<String>,
    /// The path in the v1 hierarchy carrying the `memory` controller.
    v1_memory: Option<String>,
}

pub(super) fn parse_cgroup_membership(text: &str) -> CgroupMembership {
    let mut membership = CgroupMembership::default();
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if !path.starts_with('/') || id.parse::<u32>().is_err() {
            continue;
        }
        if id == "0" && controllers.is_empty() {
            membership.v2.get_or_insert_with(|| path.to_owned());
        } else if id != "0" && controllers.split(',').any(|c| c == "memory") {
            membership.v1_memory.get_or_insert_with(|| path.to_owned());
        }
    }
    membership
}

/// One line of `/proc/self/mountinfo`, reduced to what discovery needs.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct MountEntry {
    /// The path, inside the mounted file system, that is mounted.
    pub(super) root: String,
    pub(super) mount_point: PathBuf,
    pub(super) fs_type: String,
    pub(super) super_options: String,
}

impl MountEntry {
    pub(super) fn is_cgroup_v2(&self) -> bool {
        self.fs_type == "cgroup2"
    }

    fn is_cgroup_v1_memory(&self) -> bool {
        self.fs_type == "cgroup" && self.super_options.split(',').any(|o| o == "memory")
    }
}

/// `id parent major:minor root mount-point options [optional…] - type source super-options`
pub(super) fn parse_mountinfo_line(line: &str) -> Option<MountEntry> {
    let (before, after) = line.split_once(" - ")?;
    let before: Vec<&str> = before.split_whitespace().collect();
    if before.len() < 6 {
        return None;
    }
    let mut after = after.split_whitespace();
    let fs_type = after.next()?;
    let _source = after.next()?;
    let super_options = after.next()?;
    Some(MountEntry {
        root: unescape_mountinfo(before[3])?,
        mount_point: PathBuf::from(unescape_mountinfo(before[4])?),
        fs_type: fs_type.to_owned(),
        super_options: super_options.to_owned(),
    })
}

/// Decodes mountinfo's `\ooo` octal escapes; `None` for a broken escape or
/// a result that is not UTF-8.
pub(super) fn unescape_mountinfo(field: &str) -> Option<String> {
    let bytes = field.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] != b'\\' {
            decoded.push(bytes[index]);
            index += 1;
            continue;
        }
        let digits = bytes.get(index + 1..index + 4)?;
        let mut value: u32 = 0;
        for &digit in digits {
            if !(b'0'..=b'7').contains(&digit) {
                return None;
            }
            value = value * 8 + u32::from(digit - b'0');
        }
        decoded.push(u8::try_from(value).ok()?);
        index += 4;
    }
    String::from_utf8(decoded).ok()
}

/// The non-empty components of an absolute cgroup path; `None` if it holds
/// `.` or `..` (for example a path outside the cgroup namespace).
pub(super) fn cgroup_components(path: &str) -> Option<Vec<&str>> {
    let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    if components.iter().any(|c| *c == "." || *c == "..") {
        return None;
    }
    Some(components)
}

/// The directories to read for `membership`, from the membership directory
/// up to the mount point, using the matching mount with the widest view
/// (the shortest root that contains the membership path). `None` if no
/// mount shows the membership path.
pub(super) fn cgroup_directories(
    mounts: &[MountEntry],
    membership: &str,
    matches: fn(&MountEntry) -> bool,
) -> Option<Vec<PathBuf>> {
    let member = cgroup_components(membership)?;
    let (mount, root_len) = mounts
        .iter()
        .filter(|mount| matches(mount))
        .filter_map(|mount| {
            let root = cgroup_components(&mount.root)?;
            member.starts_with(&root).then_some((mount, root.len()))
        })
        .min_by_key(|(_, root_len)| *root_len)?;
    let mut directory = mount.mount_point.clone();
    let mut directories = vec![directory.clone()];
    for component in &member[root_len..] {
        directory.push(component);
        directories.push(directory.clone());
    }
    directories.reverse();
    Some(directories)
}

/// The smallest finite limit in `file` across `directories`.
pub(super) fn smallest_limit(
    view: &dyn MemoryFileView,
    directories: &[PathBuf],
    file: &str,
    parse: fn(&str) -> Option<u64>,
) -> RuntimeResult<Option<u64>> {
    let mut smallest: Option<u64> = None;
    for directory in directories {
        if let Some(text) = view.read_optional(&directory.join(file))? {
            if let Some(limit) = parse(&text) {
                smallest = Some(smallest.map_or(limit, |current| current.min(limit)));
            }
        }
    }
    Ok(smallest)
}

/// cgroup v2 `memory.max`: `max` is unlimited; 0 or garbage is ignored.
pub(super) fn parse_cgroup_v2_limit(text: &str) -> Option<u64> {
    let text = text.trim();
    if text == "max" {
        return None;
    }
    text.parse::<u64>().ok().filter(|bytes| *bytes > 0)
}

/// cgroup v1 `memory.limit_in_bytes`: values at or above the unlimited
/// floor are unlimited; 0 or garbage is ignored.
pub(super) fn parse_cgroup_v1_limit(text: &str) -> Option<u64> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|bytes| *bytes > 0 && *bytes < CGROUP_V1_UNLIMITED_FLOOR)
}

pub(super) fn hierarchy_limit(
    view: &dyn MemoryFileView,
    mounts: &[MountEntry],
    membership: Option<&str>,
    matches: fn(&MountEntry) -> bool,
    file: &str,
    parse: fn(&str) -> Option<u64>,
) -> RuntimeResult<Option<u64>> {
    match membership.and_then(|path| cgroup_directories(mounts, path, matches)) {
        Some(directories) => smallest_limit(view, &directories, file, parse),
        None => Ok(None),
    }
}

/// The smallest finite cgroup limit visible to the process, v2 on a tie.
pub(super) fn cgroup_limit(view: &dyn MemoryFileView) -> RuntimeResult<Option<ProcessMemoryLimit>> {
    let Some(cgroup) = view.read_optional(Path::new(PROC_SELF_CGROUP))? else {
        return Ok(None);
    };
    let membership = parse_cgroup_membership(&cgroup);
    if membership == CgroupMembership::default() {
        return Ok(None);
    }
    let Some(mountinfo) = view.read_optional(Path::new(PROC_SELF_MOUNTINFO))? else {
        return Ok(None);
    };
    let mounts: Vec<MountEntry> = mountinfo.lines().filter_map(parse_mountinfo_line).collect();
    let v2 = hierarchy_limit(
        view,
        &mounts,
        membership.v2.as_deref(),
        MountEntry::is_cgroup_v2,
        CGROUP_V2_LIMIT_FILE,
        parse_cgroup_v2_limit,
    )?;
    let v1 = hierarchy_limit(
        view,
        &mounts,
        membership.v1_memory.as_deref(),
        MountEntry::is_cgroup_v1_memory,
        CGROUP_V1_LIMIT_FILE,
        parse_cgroup_v1_limit,
    )?;
    let winner = match (v2, v1) {
        (Some(v2), Some(v1)) if v1 < v2 => Some((v1, MemoryLimitSource::CgroupV1)),
        (Some(v2), _) => Some((v2, MemoryLimitSource::CgroupV2)),
        (None, Some(v1)) => Some((v1, MemoryLimitSource::CgroupV1)),
        (None, None) => None,
    };
    Ok(winner.map(|(bytes, source)| ProcessMemoryLimit::discovered(bytes, source)))
}

// ---------------------------------------------------------------------------
// Host memory
// ---------------------------------------------------------------------------

/// `MemTotal:  <n> kB` of `/proc/meminfo`, in bytes; malformed lines are
/// skipped.
pub(super) fn parse_meminfo_total(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut fields = line.strip_prefix("MemTotal:")?.split_whitespace();
        let kibibytes = fields.next()?.parse::<u64>().ok()?;
        if fields.next()? != "kB" || fields.next().is_some() {
            return None;
        }
        kibibytes.checked_mul(1024).filter(|bytes| *bytes > 0)
    })
}
