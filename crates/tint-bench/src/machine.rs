//! What the report says about where it was measured: the machine (CPU, cores, memory, compiler,
//! load), the GPU, the build profile and the date.

use std::process::Command;

/// The report's context: backend, machine, build, GPU, date and the sgemm size.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportContext {
    /// The burn backend (`flex`, `wgpu`, `cuda`).
    pub backend: String,
    /// [`machine_description`].
    pub machine: String,
    /// [`build_profile`].
    pub build: String,
    /// [`gpu_description`], on a GPU backend.
    pub gpu: Option<String>,
    /// When the section was written.
    pub date: String,
    /// Side of the sgemm.
    pub sgemm_size: usize,
}

impl ReportContext {
    /// The context of this process now, on `backend` (a GPU is described unless it is `flex`).
    pub fn probe(backend: &str, sgemm_size: usize) -> Self {
        Self {
            backend: backend.to_string(),
            machine: machine_description(),
            build: build_profile().to_string(),
            gpu: gpu_description().filter(|_| backend != "flex"),
            date: today(),
            sgemm_size,
        }
    }

    /// The report section's key: `bench-<config>` on the CPU, `bench-<config>-<backend>` on a GPU.
    pub fn section_key(&self, config_name: &str) -> String {
        if self.backend == "flex" {
            format!("bench-{config_name}")
        } else {
            format!("bench-{config_name}-{}", self.backend)
        }
    }
}

/// The GPU's name and driver (`nvidia-smi`), if there is one.
pub fn gpu_description() -> Option<String> {
    let output = Command::new("nvidia-smi")
        .args([
            "--query-gpu=name,memory.total,driver_version",
            "--format=csv,noheader",
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
    (output.status.success() && !text.is_empty()).then_some(text)
}

/// CPU model, core count, memory, compiler and the 1-minute load average, for the report.
pub fn machine_description() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let memory_gb = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .map(|kb| kb / 1024.0 / 1024.0)
        .unwrap_or(0.0);
    let rustc = Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "rustc (unknown version)".into());
    let load = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_string();
    format!(
        "{model}, {cores} cores (`nproc`), {memory_gb:.0} GB RAM; {rustc}; 1-minute load average at the end of the run: {load}"
    )
}

/// The build profile this code was compiled in.
pub fn build_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "dev profile (dependencies at opt-level 3, workspace crates at opt-level 2; the default `cargo xtask` build)"
    } else {
        "release profile"
    }
}

/// The date and time, UTC (`date -u`).
pub fn today() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown date".into())
}
