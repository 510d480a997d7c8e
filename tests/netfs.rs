//! One instance shared over a real network file system: a GlusterFS volume mounted twice on
//! this machine, "host B" in its own pid and UTS namespace (see tests/common/gluster.rs).

mod common;

use common::gluster::{HOST_B, Volume};

/// The harness itself: both mounts show one volume, host B has a host name of its own, and
/// nothing stays mounted once the volume is dropped.
#[test]
fn harness_two_mounts_of_one_volume() {
    let vol = Volume::new();
    let (a, b) = (vol.a().to_path_buf(), vol.b().to_path_buf());
    std::fs::write(a.join("from-a"), "hello\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(b.join("from-a")).unwrap(),
        "hello\n"
    );
    let out = Volume::on_b(std::path::Path::new("sh"))
        .args(["-c", "hostname; echo $$"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines, [HOST_B, "1"], "host B runs in its own namespaces");
    drop(vol);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(&*a.to_string_lossy()),
        "{a:?} left mounted"
    );
    assert!(
        !mounts.contains(&*b.to_string_lossy()),
        "{b:?} left mounted"
    );
    assert!(!a.exists(), "volume directory removed");
}
