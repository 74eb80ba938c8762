//! Phone presets: `[stack] phone = "nexus-6"` fills the stack tables a phone determines (its
//! storage, RAM, cores, kernel tick, I/O scheduler and Android's writeback settings) before the
//! scenario's own `[stack.*]` values, which override any of them.
//!
//! The papers' phones (FastTrack §5: Nexus 5, Nexus 6, Galaxy S6, Pixel; QASIO §6: Galaxy S5;
//! MobiFS §7.1: Galaxy Premier). Every value's source is beside it; "asm:" marks an assumption.

/// (name, the preset's stack tables as TOML).
pub const PHONES: [(&str, &str); 8] = [
    (
        "nexus-5",
        r#"
[device]
profile = "emmc-4.5"            # FastTrack §5: Nexus 5, eMMC (4.5 class, 2013)
capacity = "16GiB"              # Nexus 5: 16 or 32 GB
[vm]
ram = "2GiB"                    # FastTrack §5: Nexus 5, 2 GB
dirty_expire = "2s"             # Android's init.rc: dirty_expire_centisecs 200
dirty_background_ratio = 5      # Android's init.rc: dirty_background_ratio 5
[cpu]
cores = 4                       # Snapdragon 800: 4 Krait 400 cores
[kernel]
version = "3.4"                 # hammerhead: AOSP kernel/msm android-msm-hammerhead-3.4
hz = 100                        # hammerhead_defconfig (kernel/msm) sets no CONFIG_HZ: arch/arm/Kconfig's default 100
[block]
elevator = "cfq"                # hammerhead_defconfig sets no IOSCHED: CONFIG_DEFAULT_IOSCHED "cfq"; FastTrack §5
"#,
    ),
    (
        "nexus-6",
        r#"
[device]
profile = "emmc-5.1"            # FastTrack §5: Nexus 6, eMMC (5.1 class)
capacity = "32GiB"              # Nexus 6: 32 or 64 GB
queue_depth = 1                 # shamu's 3.10 mmc driver has no command queueing (drivers/mmc/card/block.c: flags CMD23, REL_WR, PACKED_CMD, no CMD_QUEUE); mainline: 1e8e55b67030 "mmc: block: Add CQE support" (4.15)
[vm]
ram = "3GiB"                    # FastTrack §5: Nexus 6, 3 GB
dirty_expire = "2s"             # Android's init.rc: dirty_expire_centisecs 200
dirty_background_ratio = 5      # Android's init.rc: dirty_background_ratio 5
[cpu]
cores = 4                       # Snapdragon 805: 4 Krait 450 cores
[kernel]
version = "3.10"                # shamu: AOSP kernel/msm android-msm-shamu-3.10
hz = 100                        # asm: msm ("shamu") defconfig, CONFIG_HZ_100 (not checked)
[block]
elevator = "cfq"                # FastTrack §5: the phones' kernels ship CFQ
"#,
    ),
    (
        "galaxy-s6",
        r#"
[device]
profile = "ufs-2.0"             # FastTrack §5: Galaxy S6, UFS 2.0
capacity = "32GiB"              # Galaxy S6: 32, 64 or 128 GB
[vm]
ram = "3GiB"                    # FastTrack §5: Galaxy S6, 3 GB
dirty_expire = "2s"             # Android's init.rc: dirty_expire_centisecs 200
dirty_background_ratio = 5      # Android's init.rc: dirty_background_ratio 5
[cpu]
cores = 4                       # Exynos 7420: the big cluster's 4 Cortex-A57 cores
[kernel]
version = "3.10"                # Galaxy S6 (SM-G920F): Samsung's exynos7420 3.10.61 kernel (asm: not checked here)
hz = 200                        # asm: Samsung's exynos7420 defconfig (not checked)
[block]
elevator = "cfq"                # FastTrack §5: the phones' kernels ship CFQ
"#,
    ),
    (
        "galaxy-premier",
        r#"
[device]
profile = "microsd"             # MobiFS §7.1: the Galaxy Premier I9260 with Kingston microSD cards
capacity = "8GiB"               # asm: the card's partition
[vm]
ram = "1GiB"                    # MobiFS §7.1: 1 GB RAM
dirty_expire = "2s"             # Android's init.rc: dirty_expire_centisecs 200
dirty_background_ratio = 5      # Android's init.rc: dirty_background_ratio 5
[cpu]
cores = 2                       # MobiFS §7.1: dual-core 1.5 GHz
[kernel]
version = "3.0"                 # asm: Android 4.1's Samsung kernels (OMAP4470) were 3.0 (not checked)
hz = 100                        # asm: Exynos/Android 4.1 kernels of 2012 (3.0), CONFIG_HZ_100
[block]
elevator = "cfq"                # asm: Android 4.1's 3.0 kernels ship CFQ
[fs]
type = "ext4"
journal_size = "128MiB"         # MobiFS §7.1: "the default 128 MB journal and 4 KB block size"
"#,
    ),
    (
        "pixel",
        r#"
[device]
profile = "ufs-2.1"             # FastTrack §5: Pixel, UFS 2.1
capacity = "32GiB"              # Pixel: 32 or 128 GB
[vm]
ram = "4GiB"                    # FastTrack §5: Pixel, 4 GB
dirty_expire = "2s"             # Android's init.rc: dirty_expire_centisecs 200
dirty_background_ratio = 5      # Android's init.rc: dirty_background_ratio 5
[cpu]
cores = 4                       # Snapdragon 821: 2 + 2 Kryo cores
[kernel]
version = "3.18"                # marlin: AOSP kernel/msm android-msm-marlin-3.18
hz = 300                        # marlin_defconfig (kernel/msm): CONFIG_HZ_300=y
[block]
elevator = "cfq"                # FastTrack §5: the phones' kernels ship CFQ
"#,
    ),
    (
        "galaxy-s5",
        r#"
[device]
profile = "emmc-5.0"            # QASIO §6: Galaxy S5 (SM-G900H, Exynos 5422), 16 GB eMMC; the QASIO scenarios' profile
capacity = "16GiB"              # QASIO §6: 16 GB
[vm]
ram = "2GiB"                    # QASIO §6: 2 GB DRAM
lowmem = "760MiB"               # exynos5422-k3g_00_defconfig (LineageOS/android_kernel_samsung_k3gxx): 32-bit ARM, CONFIG_HIGHMEM=y, CONFIG_VMSPLIT_3G; the default 240 MiB vmalloc area (asm: no vmalloc= on the bootloader's command line, not checked)
dirty_expire = "2s"             # Android's init.rc: dirty_expire_centisecs 200 (QASIO §6)
dirty_background_ratio = 5      # Android's init.rc: dirty_background_ratio 5 (QASIO §6)
[cpu]
cores = 4                       # Exynos 5422: the big cluster's 4 Cortex-A15 cores (QASIO §6)
[kernel]
version = "3.10"                # exynos5422-k3g_00_defconfig: "Linux/arm 3.10.9 Kernel Configuration"
hz = 200                        # exynos5422-k3g_00_defconfig: CONFIG_HZ=200 (Samsung's HZ_FIXED)
[block]
elevator = "cfq"                # exynos5422-k3g_00_defconfig: CONFIG_DEFAULT_IOSCHED="cfq"
[fs]
type = "ext4"                   # fstab.universal5422 (LineageOS/android_device_samsung_k3gxx): /data ext4
discard = true                  # /data: noatime,nosuid,nodev,discard,noauto_da_alloc,journal_async_commit,errors=panic
auto_da_alloc = false           # /data: noauto_da_alloc
journal_async_commit = true     # /data: journal_async_commit
"#,
    ),
    (
        "pixel-8",
        r#"
io_policy = "android"           # Android's task profiles (system/core/libprocessgroup/profiles/task_profiles.json)
[device]
profile = "ufs-3.1"             # Pixel 8 (Tensor G3): UFS 3.1
capacity = "128GiB"             # Pixel 8: 128 or 256 GB
[vm]
ram = "8GiB"                    # Pixel 8: 8 GB
dirty_expire = "2s"             # Android's init.rc: dirty_expire_centisecs 200
dirty_background_ratio = 5      # Android's init.rc: dirty_background_ratio 5
[cpu]
cores = 9                       # Tensor G3: 1 Cortex-X3 + 4 A715 + 4 A510
syscall = "350ns"               # asm: a 2023 flagship core costs about the calibration machine's (CpuConfig::desktop, docs/cpu.md)
copy_bandwidth = "3.7GB/s"      # asm: as above
page_alloc = "1700ns"           # asm: as above
page_reclaim = "600ns"          # asm: as above
[kernel]
version = "5.15"                # Pixel 8 launched on GKI android14-5.15 (android-gs-shusky-5.15)
config = "android"              # arch/arm64/configs/gki_defconfig of android13/14-5.15: no CONFIG_BLK_WBT
hz = 250                        # gki_defconfig sets no CONFIG_HZ: kernel/Kconfig.hz's default HZ_250
[block]
elevator = "bfq"                # device/google/zuma conf/init.zuma.rc: "write /sys/block/sda/queue/scheduler bfq"
nr_requests = 128               # init.zuma.rc on sys.boot_completed: "write /sys/block/sda/queue/nr_requests 128"
[block.bfq]
slice_idle = 0                  # init.zuma.rc: "write /sys/block/sda/queue/iosched/slice_idle 0"
[fs]
type = "f2fs"                   # device/google/zuma conf/fstab.zuma.in: /data is f2fs
f2fs_preset = "android"         # fstab.zuma.in: discard, fsync_mode=nobarrier (atgc, compression, checkpoint_merge: not modelled)
"#,
    ),
    (
        "galaxy-s24",
        r#"
io_policy = "android"           # Android's task profiles (system/core/libprocessgroup/profiles/task_profiles.json)
[device]
profile = "ufs-3.1"             # Galaxy S24 128 GB: UFS 3.1 (the 256/512 GB models: UFS 4.0, not modelled)
capacity = "128GiB"             # the 128 GB model
[vm]
ram = "8GiB"                    # Galaxy S24: 8 GB
dirty_expire = "2s"             # Android's init.rc: dirty_expire_centisecs 200
dirty_background_ratio = 5      # Android's init.rc: dirty_background_ratio 5
[cpu]
cores = 10                      # Exynos 2400: 1 Cortex-X4 + 2 + 3 A720 + 4 A520
syscall = "350ns"               # asm: a 2024 flagship core costs about the calibration machine's (CpuConfig::desktop, docs/cpu.md)
copy_bandwidth = "3.7GB/s"      # asm: as above
page_alloc = "1700ns"           # asm: as above
page_reclaim = "600ns"          # asm: as above
[kernel]
version = "6.1"                 # Galaxy S24 launched on GKI android14-6.1
config = "android"              # arch/arm64/configs/gki_defconfig of android14-6.1: no CONFIG_BLK_WBT
hz = 250                        # gki_defconfig sets no CONFIG_HZ: kernel/Kconfig.hz's default HZ_250
[block]
elevator = "mq-deadline"        # asm: Samsung ships its own SSG scheduler (block/ssg-iosched.c, derived from mq-deadline; not modelled): mq-deadline stands in
[fs]
type = "f2fs"                   # asm: Samsung formats /data as F2FS since the Galaxy S10 era (not checked against the S24's fstab)
f2fs_preset = "android"         # asm: Android's F2FS options (discard, fsync_mode=nobarrier), as the Pixels' fstab
"#,
    ),
];

/// The stack tables of phone `name`.
pub fn preset(name: &str) -> Result<toml::Table, String> {
    let (name, _) = PHONES
        .iter()
        .find(|(phone, _)| *phone == name)
        .ok_or_else(|| {
            format!(
                "`phone` `{name}` is not a known phone: {}",
                PHONES
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
    Ok(parsed()[name].clone())
}

/// Every preset parsed, once per process: a scenario parse asks for its phone's tables once per
/// variant and again for their provenance, and parsing the preset's TOML was a third of a
/// scenario parse (the many-small-runs cost, docs/performance.md).
fn parsed() -> &'static std::collections::BTreeMap<&'static str, toml::Table> {
    static PARSED: std::sync::OnceLock<std::collections::BTreeMap<&'static str, toml::Table>> =
        std::sync::OnceLock::new();
    PARSED.get_or_init(|| {
        PHONES
            .iter()
            .map(|&(name, source)| {
                let table = toml::from_str(source).expect("built-in phone presets parse");
                (name, table)
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_a_valid_stack() {
        for (name, _) in PHONES {
            let table = preset(name).unwrap();
            let stack: super::super::StackConfig = toml::Value::Table(table).try_into().unwrap();
            stack.validate().unwrap();
        }
        assert!(preset("nexus-9").unwrap_err().contains("nexus-6"));
    }

    /// Every preset names the kernel its phone shipped with; the Nexus 6's 3.10 mmc driver has
    /// no command queueing, so its CMDQ-capable eMMC 5.1 takes one command at a time.
    #[test]
    fn every_phone_carries_its_kernel_and_the_nexus_6_has_no_command_queue() {
        use crate::kernel::KernelVersion as V;
        let stack = |name: &str| -> super::super::StackConfig {
            toml::Value::Table(preset(name).unwrap())
                .try_into()
                .unwrap()
        };
        for (name, version) in [
            ("nexus-5", V::V3_4),
            ("nexus-6", V::V3_10),
            ("galaxy-s6", V::V3_10),
            ("galaxy-premier", V::V3_0),
            ("pixel", V::V3_18),
            ("pixel-8", V::V5_15),
            ("galaxy-s24", V::V6_1),
        ] {
            assert!(
                preset(name).unwrap()["kernel"].get("version").is_some(),
                "{name}"
            );
            let stack = stack(name);
            assert_eq!(stack.kernel.version, version, "{name}");
            stack.block.check_era(&stack.kernel).unwrap();
        }
        assert_eq!(stack("nexus-6").device.resolve().unwrap().queue_depth, 1);
        let pixel_8 = stack("pixel-8");
        assert_eq!(pixel_8.block.elevator, "bfq");
        assert_eq!(
            pixel_8.block.wbt_min_lat_nsec(&pixel_8.kernel, true),
            None,
            "GKI: no CONFIG_BLK_WBT_MQ, and BFQ"
        );
        assert_eq!(pixel_8.fs.kind, crate::fs::ext4::FsKind::F2fs);
    }

    const APP: &str = "[[app]]\nname = \"a\"\n[app.workload.toy-io]\ninterval = \"20ms\"\n";

    #[test]
    fn a_scenario_names_a_phone_and_overrides_what_it_sets_itself() {
        let source = format!(
            "name = \"p\"\nduration = \"1s\"\n[stack]\nphone = \"nexus-6\"\n[stack.vm]\nram = \"2GiB\"\n{APP}"
        );
        let s = super::super::parse("p.toml", &source).unwrap();
        let stack = &s.variants[0].stack;
        assert_eq!(stack.device.profile, "emmc-5.1");
        assert_eq!(stack.kernel.hz.0, 100);
        assert_eq!(stack.vm.ram, 2 << 30, "the scenario's own value wins");
        // A variant may pick another phone.
        let source = format!(
            "name = \"p\"\nduration = \"1s\"\n[stack]\nphone = \"nexus-6\"\n{APP}[[variant]]\nname = \"n6\"\n[[variant]]\nname = \"s6\"\n[variant.stack]\nphone = \"galaxy-s6\"\n"
        );
        let s = super::super::parse("p.toml", &source).unwrap();
        assert_eq!(s.variants[0].stack.device.profile, "emmc-5.1");
        assert_eq!(s.variants[1].stack.device.profile, "ufs-2.0");
        assert_eq!(s.variants[1].stack.vm.ram, 3 << 30);
    }

    #[test]
    fn the_galaxy_s5_is_a_32_bit_3_10_phone_with_samsungs_data_mount_options() {
        let table = preset("galaxy-s5").unwrap();
        let stack: super::super::StackConfig = toml::Value::Table(table).try_into().unwrap();
        assert_eq!(stack.vm.lowmem, crate::mm::zones::ARM_VMSPLIT_3G_LOWMEM);
        assert!(stack.vm.has_highmem() && !stack.vm.highmem_is_dirtyable);
        assert_eq!(stack.kernel.version, crate::kernel::KernelVersion::V3_10);
        assert_eq!(stack.kernel.hz.0, 200);
        assert!(stack.fs.discard && stack.fs.journal_async_commit && !stack.fs.auto_da_alloc);
    }

    #[test]
    fn an_unknown_phone_of_a_variant_is_an_error_at_the_variants_line() {
        let source = format!(
            "name = \"p\"\nduration = \"1s\"\n[stack]\nphone = \"nexus-6\"\n{APP}[[variant]]\nname = \"v\"\n[variant.stack]\nphone = \"iphone\"\n"
        );
        let error = super::super::parse("p.toml", &source)
            .unwrap_err()
            .to_string();
        assert!(error.contains("p.toml:12"), "{error}");
    }

    #[test]
    fn an_unknown_phone_is_an_error_at_its_line() {
        let source = format!("name = \"p\"\nduration = \"1s\"\n[stack]\nphone = \"iphone\"\n{APP}");
        let error = super::super::parse("p.toml", &source)
            .unwrap_err()
            .to_string();
        assert!(error.contains("p.toml:4"), "{error}");
        assert!(error.contains("nexus-5"), "{error}");
    }
}
