//! Faults a drill inflicts on an owned control plane: the API server killed and started again,
//! etcd frozen and thawed or killed and started again on the same data directory. Each acts on
//! the PIDs this control plane started and on nothing else.

use std::time::{Duration, Instant};

use super::ControlPlane;
use crate::process::{self, Component};
use crate::{Error, Result, io_err};

const APISERVER: &str = "kube-apiserver";
const ETCD: &str = "etcd";

impl ControlPlane {
    /// SIGKILLs the API server: open watches break and in-flight requests fail, as when its
    /// node dies. [`start_apiserver`](Self::start_apiserver) brings it back.
    pub fn kill_apiserver(&self) -> Result<()> {
        self.kill_component(APISERVER)
    }

    /// Starts the killed API server again with the same flags (port, certificates, etcd) and
    /// waits until it answers `/readyz`; returns how long that took.
    pub async fn start_apiserver(&self, timeout: Duration) -> Result<Duration> {
        let started = Instant::now();
        self.respawn(APISERVER)?;
        self.wait_for_readyz(timeout).await?;
        Ok(started.elapsed())
    }

    /// Kills the API server, leaves it down for `down`, starts it again and waits until it
    /// is ready; returns how long it took to be ready once started.
    pub async fn restart_apiserver(&self, down: Duration, timeout: Duration) -> Result<Duration> {
        self.kill_apiserver()?;
        tokio::time::sleep(down).await;
        self.start_apiserver(timeout).await
    }

    /// Freezes the API server (SIGSTOP): connections stay open and nothing answers, a true
    /// black hole, until [`resume_apiserver`](Self::resume_apiserver).
    pub fn pause_apiserver(&self) -> Result<()> {
        self.signal_component(APISERVER, libc::SIGSTOP)
    }

    /// Thaws a paused API server (SIGCONT) and waits until it is ready; returns how long
    /// that took.
    pub async fn resume_apiserver(&self, timeout: Duration) -> Result<Duration> {
        let started = Instant::now();
        self.signal_component(APISERVER, libc::SIGCONT)?;
        self.wait_for_readyz(timeout).await?;
        Ok(started.elapsed())
    }

    /// Freezes the API server like [`pause_apiserver`](Self::pause_apiserver) and returns a
    /// guard that thaws it (SIGCONT) when dropped, so a drill that fails midway leaves a
    /// running API server to the tests after it.
    pub fn freeze_apiserver(&self) -> Result<FrozenApiServer<'_>> {
        self.pause_apiserver()?;
        Ok(FrozenApiServer {
            cp: self,
            thawed: false,
        })
    }

    /// Freezes etcd (SIGSTOP): the API server's storage calls hang until
    /// [`resume_etcd`](Self::resume_etcd), as with a stalled disk or a paused VM.
    pub fn pause_etcd(&self) -> Result<()> {
        self.signal_component(ETCD, libc::SIGSTOP)
    }

    /// Thaws a paused etcd (SIGCONT) and waits until the API server is ready again; returns
    /// how long that took.
    pub async fn resume_etcd(&self, timeout: Duration) -> Result<Duration> {
        let started = Instant::now();
        self.signal_component(ETCD, libc::SIGCONT)?;
        self.wait_for_readyz(timeout).await?;
        Ok(started.elapsed())
    }

    /// Kills etcd, leaves it down for `down`, starts it again on the same data directory and
    /// waits until the API server is ready; returns how long that took once etcd started.
    pub async fn restart_etcd(&self, down: Duration, timeout: Duration) -> Result<Duration> {
        self.kill_component(ETCD)?;
        tokio::time::sleep(down).await;
        let started = Instant::now();
        self.respawn(ETCD)?;
        self.wait_for_readyz(timeout).await?;
        Ok(started.elapsed())
    }

    /// Runs `act` on the last component called `name` (a restarted one replaces its original).
    fn with_component<T>(
        &self,
        name: &str,
        act: impl FnOnce(&mut Component) -> Result<T>,
    ) -> Result<T> {
        let mut components = self.components.lock().map_err(|_| super::poisoned())?;
        let component = components
            .iter_mut()
            .rev()
            .find(|c| c.name == name)
            .ok_or_else(|| Error::Invalid {
                context: format!("acting on {name}"),
                message: "this control plane did not start it".into(),
            })?;
        act(component)
    }

    fn kill_component(&self, name: &str) -> Result<()> {
        self.with_component(name, |c| {
            c.kill().map_err(io_err(format!("killing {name}")))
        })
    }

    fn signal_component(&self, name: &str, signal: libc::c_int) -> Result<()> {
        self.with_component(name, |c| {
            process::signal(c.pid, signal);
            Ok(())
        })
    }

    /// Starts a killed component again from the spec it was first started with.
    fn respawn(&self, name: &str) -> Result<()> {
        self.with_component(name, |c| {
            if c.exited().is_none() {
                return Err(Error::Invalid {
                    context: format!("starting {name} again"),
                    message: "it is still running".into(),
                });
            }
            *c = process::spawn(c.spec.clone()).map_err(io_err(format!("starting {name}")))?;
            Ok(())
        })
    }
}

/// An API server frozen by [`ControlPlane::freeze_apiserver`]: thawed by
/// [`thaw`](Self::thaw), or by SIGCONT when dropped on any other path.
pub struct FrozenApiServer<'a> {
    cp: &'a ControlPlane,
    thawed: bool,
}

impl FrozenApiServer<'_> {
    /// Thaws the API server (SIGCONT) and waits until it is ready; returns how long that took.
    pub async fn thaw(mut self, timeout: Duration) -> Result<Duration> {
        // SIGCONT goes first in `resume_apiserver`: once it is called, the guard has nothing
        // left to undo.
        self.thawed = true;
        self.cp.resume_apiserver(timeout).await
    }
}

impl Drop for FrozenApiServer<'_> {
    fn drop(&mut self) {
        if !self.thawed {
            let _ = self.cp.signal_component(APISERVER, libc::SIGCONT);
        }
    }
}
