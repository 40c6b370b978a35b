//! `opsctl`: see `opsctl help` and the crate docs in lib.rs.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(opsctl::main_with(&args));
}
