#![allow(clippy::doc_markdown, reason = "the paper's terms and file names in prose")]
//! Run the PEDaLS benchmark: `cargo run --release -p varve-pds --example bench_pds [WORKLOADS] [OPS]`
//! (defaults: the paper's 100 workloads of 1,000 operations).

fn main() -> Result<(), varve_pds::PdsError> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().expect("a number"));
    let defaults = varve_pds::bench::BenchConfig::default();
    let config = varve_pds::bench::BenchConfig {
        workloads: args.next().unwrap_or(defaults.workloads),
        ops: args.next().unwrap_or(defaults.ops),
        ..defaults
    };
    let report = varve_pds::bench::run(&config, &mut |done, total| eprint!("\r{done}/{total}"))?;
    eprintln!();
    println!("{}", report.to_markdown());
    Ok(())
}
