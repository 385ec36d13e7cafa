//! The command line: `--run-for`, `--data-dir`, `--help`.

use super::*;

/// Command-line arguments.
pub(crate) struct Args {
    pub(crate) run_for: Option<Duration>,
    pub(crate) data_dir: PathBuf,
}

pub(crate) const USAGE: &str = "usage: broker_entrypoint [--run-for <seconds>] [--data-dir <path>]";

/// `--help`: the flags, every environment variable the runtime reads (from
/// the crate's own catalog) and the exit codes.
pub(crate) fn help() -> String {
    let mut help = format!(
        "broker_entrypoint: a broker-style entrypoint of rocketmq-runtime\n\n{USAGE}\n\n\
         flags:\n  \
         --run-for <seconds>  stop after this many seconds (an internal shutdown request);\n  \
         \x20                    without it, run until SIGTERM, SIGINT or POST /drainz\n  \
         --data-dir <path>    directory of the durable offset table (default target/broker-data)\n  \
         -h, --help           print this help\n\n\
         environment:\n"
    );
    for variable in ENVIRONMENT_VARIABLES {
        help.push_str(&format!(
            "  {}\n      {}\n      default: {}; accepted: {}\n",
            variable.name, variable.purpose, variable.default, variable.accepted
        ));
        if variable.name == "ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES" {
            help.push_str(&format!(
                "      this broker needs at least {MIN_MEMORY_LIMIT_BYTES} bytes (1 MiB)\n"
            ));
        }
    }
    help.push_str(&format!(
        "\nexit codes:\n  \
         {EXIT_CLEAN}  clean stop: healthy shutdown report, every accepted offset durable\n  \
         {EXIT_FAILED}  unhealthy or failed: startup failure, unhealthy report, failed service,\n     \
         critical failure or metadata that did not become durable\n  \
         {EXIT_USAGE}  usage: unknown flag, bad flag value or refused ROCKETMQ_* value\n"
    ));
    help
}

/// The smallest process memory limit the broker starts with (its request
/// queue, offset tables and checkpoint fit in it).
pub(crate) const MIN_MEMORY_LIMIT_BYTES: u64 = 1 << 20;

/// Why the arguments were not parsed.
pub(crate) enum ArgsError {
    /// `--help`: print the help to stdout and exit 0.
    Help,
    /// A usage error: print it to stderr (one line) and exit 2.
    Usage(String),
}

impl From<&str> for ArgsError {
    fn from(message: &str) -> Self {
        Self::Usage(message.to_owned())
    }
}

impl From<String> for ArgsError {
    fn from(message: String) -> Self {
        Self::Usage(message)
    }
}

pub(crate) fn parse_args() -> Result<Args, ArgsError> {
    // `args_os`: a path argument need not be UTF-8 (`args` would panic).
    let mut args = std::env::args_os().skip(1);
    let mut parsed = Args {
        run_for: None,
        data_dir: PathBuf::from("target/broker-data"),
    };
    while let Some(arg) = args.next() {
        let Some(flag) = arg.to_str() else {
            return Err(format!("unknown argument `{}`", arg.to_string_lossy()).into());
        };
        match flag {
            "--run-for" => {
                let value = args.next().ok_or("--run-for needs a number of seconds")?;
                let value = value.to_string_lossy();
                let seconds: f64 = value
                    .parse()
                    .map_err(|_| format!("--run-for: `{value}` is not a number of seconds"))?;
                parsed.run_for = Some(Duration::try_from_secs_f64(seconds).map_err(|_| {
                    format!("--run-for: `{value}` must be a non-negative, representable number of seconds")
                })?);
            }
            "--data-dir" => {
                let value = args.next().ok_or("--data-dir needs a path")?;
                if value.is_empty() {
                    return Err("--data-dir: the path is empty (give a directory)".into());
                }
                parsed.data_dir = PathBuf::from(value);
            }
            "--help" | "-h" => return Err(ArgsError::Help),
            other => return Err(format!("unknown argument `{other}`").into()),
        }
    }
    Ok(parsed)
}
