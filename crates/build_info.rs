// Included by the build scripts of the crates whose binaries print a version (kungfud, kungfu):
// `include!("../build_info.rs")`, then `emit_build_info()` from `main`.

/// Sets `KUNGFU_COMMIT` (git's HEAD, 12 hex digits, or `unknown` outside a git checkout),
/// `KUNGFU_RUSTC` (`rustc --version` of the compiler cargo uses) and
/// `KUNGFU_BUILD_DATE` (the UTC date the script ran, `YYYY-MM-DD`) for `--version` (issue #16), and
/// asks cargo to run the script again when HEAD moves, and only then.
fn emit_build_info() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|s| !s.is_empty())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=KUNGFU_COMMIT={commit}");
    // The compiler, for the build-info metric: cargo names it to build scripts in `RUSTC`.
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let rustc = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=KUNGFU_RUSTC={rustc}");
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() / 86_400)
        .unwrap_or(0) as i64;
    let (y, m, d) = civil_from_days(days);
    println!("cargo:rustc-env=KUNGFU_BUILD_DATE={y:04}-{m:02}-{d:02}");
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        let common_dir = git(&["rev-parse", "--git-common-dir"]);
        if let Some(packed) = common_dir.as_ref().map(|c| format!("{c}/packed-refs")) {
            if std::path::Path::new(&packed).exists() {
                println!("cargo:rerun-if-changed={packed}");
            }
        }
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let common = git(&["rev-parse", "--git-common-dir"]).unwrap_or_else(|| dir.clone());
            let common = if std::path::Path::new(&common).is_absolute() {
                common
            } else {
                format!("{}/{common}", std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default())
            };
            // A ref that lives only in packed-refs has no file of its own (a missing file would
            // make cargo run this script on every build); its next update writes one.
            let loose = format!("{common}/{head}");
            if std::path::Path::new(&loose).exists() {
                println!("cargo:rerun-if-changed={loose}");
            }
        }
    } else {
        println!("cargo:rerun-if-changed=build.rs");
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}
