//! Phone presets: `[stack] phone = "nexus-6"` fills the stack tables a phone determines (its
//! storage, RAM, cores, kernel tick, I/O scheduler and Android's writeback settings) before the
//! scenario's own `[stack.*]` values, which override any of them.
//!
//! The papers' phones (FastTrack §5: Nexus 5, Nexus 6, Galaxy S6, Pixel; QASIO §6: Galaxy S5;
//! MobiFS §7.1: Galaxy Premier). Every value's source is beside it; "asm:" marks an assumption.

/// (name, the preset's stack tables as TOML).
pub const PHONES: [(&str, &str); 6] = [
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
hz = 100                        # asm: msm8974 ("hammerhead") defconfig, CONFIG_HZ_100 as msm kernels of the time
[block]
elevator = "cfq"                # FastTrack §5: the phones' kernels ship CFQ
"#,
    ),
    (
        "nexus-6",
        r#"
[device]
profile = "emmc-5.1"            # FastTrack §5: Nexus 6, eMMC (5.1 class)
capacity = "32GiB"              # Nexus 6: 32 or 64 GB
[vm]
ram = "3GiB"                    # FastTrack §5: Nexus 6, 3 GB
dirty_expire = "2s"             # Android's init.rc: dirty_expire_centisecs 200
dirty_background_ratio = 5      # Android's init.rc: dirty_background_ratio 5
[cpu]
cores = 4                       # Snapdragon 805: 4 Krait 450 cores
[kernel]
hz = 100                        # asm: msm ("shamu") defconfig, CONFIG_HZ_100
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
hz = 300                        # asm: msm 3.18 ("marlin") defconfig, CONFIG_HZ_300
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
];

/// The stack tables of phone `name`.
pub fn preset(name: &str) -> Result<toml::Table, String> {
    let (_, source) = PHONES
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
    Ok(toml::from_str(source).expect("built-in phone presets parse"))
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
    fn an_unknown_phone_is_an_error_at_its_line() {
        let source = format!("name = \"p\"\nduration = \"1s\"\n[stack]\nphone = \"iphone\"\n{APP}");
        let error = super::super::parse("p.toml", &source)
            .unwrap_err()
            .to_string();
        assert!(error.contains("p.toml:4"), "{error}");
        assert!(error.contains("nexus-5"), "{error}");
    }
}
