//! `varve serve`: the data directory's namespaces over HTTP (see
//! `varve_server` and `docs/http.md`). Prints the store URI clients use once
//! it listens; SIGTERM or Ctrl-C stops it gracefully.

use std::io::{IsTerminal as _, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use varve_log::SyncPolicy;
use varve_runtime::Manifest;
use varve_server::{ServeOptions, Server, TlsFiles, Tokens};

use super::Context;

/// What `varve serve` was asked for.
pub struct ServeRequest {
    pub listen: SocketAddr,
    pub token_file: Option<PathBuf>,
    pub insecure: bool,
    /// Serve HTTPS with these files (`--tls-cert`, `--tls-key`).
    pub tls: Option<TlsFiles>,
    pub sync: SyncPolicy,
    pub connections_max: usize,
    /// Apps whose runtimes the server hosts.
    pub manifests: Vec<PathBuf>,
}

pub fn serve(ctx: &Context<'_>, request: &ServeRequest) -> anyhow::Result<()> {
    // Structured logs on stderr; RUST_LOG=varve_server=debug for more.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();

    let mut options = ServeOptions::new(request.listen, ctx.data.clone());
    options.journal = varve_log::JournalOptions { sync: request.sync, read_only: false, ..ctx.journal };
    options.insecure = request.insecure;
    options.tls.clone_from(&request.tls);
    options.connections_max = request.connections_max;
    if let Some(path) = &request.token_file {
        options.tokens = Tokens::read(path)?;
    }
    for path in &request.manifests {
        let manifest = Manifest::load(path)?;
        if manifest.sync != request.sync {
            let _ = writeln!(
                std::io::stderr(),
                "varve serve: warning: {}: the manifest's `sync` does not apply here; every namespace is written with --sync",
                path.display()
            );
        }
        options.manifests.push(manifest);
    }
    options.builtins = super::runtime::builtins();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("varve-serve")
        .build()
        .context("starting the server's threads")?;
    runtime.block_on(async {
        let server = Server::bind(options).await?;
        let uri = server.uri().to_owned();
        {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "varve serve: listening on {uri} (data {})", ctx.data.display())?;
            stdout.flush()?;
        }
        server.run(stop_signal()).await?;
        anyhow::Ok(())
    })?;
    // Blocking threads still finishing a write hold their namespace until done.
    runtime.shutdown_timeout(Duration::from_secs(10));
    Ok(())
}

/// Completes on SIGTERM or SIGINT (Ctrl-C).
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        // Without signal handlers, only a kill stops the server.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
