fn main() -> std::process::ExitCode {
    runbyte_core::cli::main()
}
