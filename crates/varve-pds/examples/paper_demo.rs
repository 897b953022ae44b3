//! Print the paper's worked example (Figure 3): `cargo run -p varve-pds --example paper_demo`.
fn main() {
    println!("{}", varve_pds::demo::paper_example().expect("demo"));
}
