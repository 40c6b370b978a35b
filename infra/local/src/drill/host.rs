//! The function host as the drill sees it: a child process started, killed with SIGKILL, and
//! stopped gracefully.

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The function host, started and killed as a child process.
pub(super) struct Host {
    pub(super) child: Option<Child>,
    pub(super) api_port: u16,
    pub(super) supplier_port: u16,
    pub(super) log: PathBuf,
    pub(super) stack_file: PathBuf,
}

impl Host {
    pub(super) fn api(&self) -> String {
        format!("http://127.0.0.1:{}", self.api_port)
    }

    pub(super) fn start(&mut self) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        let _ = std::fs::remove_file(&self.stack_file);
        let exe = std::env::current_exe().context("finding local-stack itself")?;
        let child = Command::new(&exe)
            .arg("up")
            .env("FEEDSAFE_PORT", self.api_port.to_string())
            .env("FEEDSAFE_SUPPLIER_PORT", self.supplier_port.to_string())
            .env("FEEDSAFE_STACK_PREFIX", "drill")
            .env("FEEDSAFE_STACK_FILE", &self.stack_file)
            .env("FEEDSAFE_PULL_EVERY_SECONDS", "off")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting the function host {}", exe.display()))?;
        // For scripts/drill's cleanup, should this drill itself be killed.
        std::fs::write(
            self.stack_file.with_extension("pid"),
            child.id().to_string(),
        )?;
        self.child = Some(child);
        let agent = agent();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(120) {
            if let Some(child) = &mut self.child {
                if let Some(status) = child.try_wait()? {
                    bail!(
                        "the function host exited at start ({status}); see {}",
                        self.log.display()
                    );
                }
            }
            // Up once it answers and has written its stack file (after the server starts).
            if self.stack_file.exists()
                && agent
                    .get(&format!("{}/health", self.api()))
                    .call()
                    .is_ok_and(|r| r.status() == 200)
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("the function host did not answer /health within 120 s")
    }

    pub(super) fn kill(&mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill().context("SIGKILL to the function host")?;
            child.wait()?;
        }
        Ok(())
    }

    /// SIGTERM, then waits for the graceful stop; its exit status.
    pub(super) fn stop(&mut self) -> Result<Option<i32>> {
        let Some(mut child) = self.child.take() else {
            return Ok(None);
        };
        let pid = child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status()?;
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status.code());
            }
            if start.elapsed() > Duration::from_secs(120) {
                child.kill()?;
                bail!("the function host did not stop within 120 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

pub(super) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into()
}
