# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_chainweaver_global_optspecs
    string join \n store= format= q/quiet h/help V/version
end

function __fish_chainweaver_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_chainweaver_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_chainweaver_using_subcommand
    set -l cmd (__fish_chainweaver_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c chainweaver -n "__fish_chainweaver_needs_command" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_needs_command" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_needs_command" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "analyze" -d 'The main job: import agent logs, mine repeated tool sequences, and report candidate flows'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "import" -d 'Import agent logs into the store (format detected, or named with --input-format)'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "mine" -d 'Mine the stored traces for repeated tool sequences and propose candidate flows'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "patterns" -d 'The patterns the last `mine` found'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "candidates" -d 'Candidate flows: list, show, export'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "verify" -d 'Replay candidates against held-out traffic and record their verdicts'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "verdicts" -d 'Verdicts of verified candidates: list, show'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "collect" -d 'Receive OpenTelemetry traces over OTLP/HTTP and store their tool calls'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "record" -d 'Stand in front of an MCP server (stdio) and record the tool calls it answers'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "traces" -d 'Inspect stored traces: list, show, stats, export, convert'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "tui" -d 'Browse traces, tools, patterns and candidates in the terminal'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "datasets" -d 'Generate synthetic agent traffic with planted flows'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "run" -d 'Run a flow file (or a registered flow) with command tools'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "flows" -d 'Validate flow files; list, show and register flows in the store'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "replay" -d 'Replay a saved execution result and compare it step by step'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "serve" -d 'Serve registered flows, and chain tools made at runtime, as MCP tools'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "cluster" -d 'Run a Ballista cluster\'s scheduler or an executor, for `mine --engine ballista`'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "completions" -d 'Print shell completions (bash, zsh, fish, elvish, powershell)'
complete -c chainweaver -n "__fish_chainweaver_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l input-format -d 'The input files\' format, instead of detecting it per file' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l source -d 'The traces\' source label (default: `import:<format>:<file name>`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l prefix -d 'Put this in front of every imported trace id' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l rejects -d 'Where rejected records go, as JSON Lines' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l redact-key -d 'Also redact the values of keys containing WORD (case and separators ignored)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l redact-pattern -d 'Also redact text matching REGEX inside every string (only its `secret` group, if named)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l min-support -d 'A pattern must appear in at least this many distinct traces' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l min-length -d 'Shortest pattern (use 1 to count single tools, as the literature does)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l max-length -d 'Longest pattern (default: 10 when proposing candidates, unbounded with --count-only)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l max-gap -d 'Allow up to N unrelated calls between two steps of a pattern (sequences with gaps). Without it, patterns are contiguous' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l max-candidates -d 'Propose at most this many candidates (the best-ranked patterns)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l sample -d 'Infer each candidate\'s bindings from at most N of its occurrences, spread evenly over them (support, counts and support per day stay the full figures); `all` reads every occurrence' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l probe -d 'Infer a pattern with more occurrences first on N of them; when a step is then linked to no other (a flow padded with an unrelated call, or tools that merely follow each other), the candidate is built from those N. `off` reads the whole sample for every pattern' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l spmf -d 'With --count-only: mine this SPMF sequence file instead of the store' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l holdout -d 'Hold this percent of the traces (chosen by a hash of the trace id, the same on every run) out of mining, for `verify` to replay. Default: 0 for `mine`, 20 for `analyze`' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l engine -d 'Where the support counting runs. `datafusion` counts the closed patterns as Apache DataFusion query plans over the store\'s Parquet files in place (a SQLite store through its tool-name columns) and samples the occurrences of the best-ranked there (with --max-gap, in two passes over the tool names); bindings are inferred from that sample in-process and the candidates stored, the same as without an engine. `ballista` runs the counting plans on a Ballista cluster (see --scheduler), --max-gap too; this machine then finds the best-ranked patterns\' occurrences in streamed passes over the tool names and builds and stores the candidates the same way. Need a build with the `datafusion` or `ballista` feature' -r -f -a "in-process\t'The built-in miner'
datafusion\t'Apache DataFusion, embedded'
ballista\t'The same plans on a Ballista cluster (--scheduler)'"
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l scheduler -d 'With --engine ballista: the cluster\'s scheduler, e.g. `df://localhost:50050`. Its executors read the Parquet store\'s files by the paths this machine sees' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l engine-memory -d 'With --engine datafusion: the memory its sorts and groupings may hold, in MiB, before they spill to the temporary folder (default: half the machine\'s memory). The tables kept between pattern lengths always go there' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l query-timeout -d 'With --engine ballista: give up on a pattern length\'s query after this many seconds (default 1800). A job waits as long as the cluster has no executor (the scheduler runs a lost executor\'s tasks again on the others); the run then fails naming the scheduler, and nothing is stored' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l live -d 'Replay with live tools from this command-tool manifest instead of the recorded calls' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l ignore -d 'A volatile field left out when matching recorded calls and comparing replays: a JSON pointer, optionally for one tool (`/request_id`, `search:/nonce`, `/items/*/ts`). Repeatable' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l min-exact -d 'Share of exact replays at or above which a candidate is verified' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l min-partial -d 'Share of exact replays at or above which a candidate is partial (below: rejected)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l min-occurrences -d 'Fewer held-out occurrences than this and a candidate is rejected for lack of evidence' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l min-data-flow -d 'Reject candidates whose share of steps linked by data flow is below this. The default 1 asks every step to read from or feed another: unrelated calls that merely repeat together (or an agent\'s `think` padding a flow) replay trivially and prove nothing' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l max-occurrences -d 'Replay at most this many held-out occurrences per candidate' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l folds -d 'Cross-validate: mine K times, each time on all folds but one, and replay on the fold left out (instead of one 80/20 hold-out)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l report -d 'Also write the report as Markdown to this file' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l fold-share -d 'Fold a verified flow into a longer one when at least this share of its occurrences lie inside the longer one\'s (other loop counts and other first steps always fold); above 1, parts are never folded' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l no-redact -d 'Store everything as it is in the logs, secrets included'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l any-gap -d 'With --count-only: any gap at all (all frequent sequential patterns)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l count-only -d 'Only count the frequent patterns and print the time spent; store nothing'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l emit-sql -d 'Print the SQL that counts these closed contiguous patterns, with their support and occurrences, and exit without reading the store. It reads a relation named `steps` (columns trace_id, step_index, tool_name: the store\'s Parquet `steps` folder) and runs unchanged on Spark SQL, DuckDB and DataFusion'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l all-frequent -d 'With --emit-sql or an --engine: every frequent contiguous pattern of the lengths asked for, closed or not (the counts the pattern mining literature publishes, with --min-length 1), instead of the closed ones `mine` stores'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -l allow-side-effects -d 'With --live: also run tools not marked `read_only = true` (they may change the world)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand analyze" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand import" -l input-format -d 'The input files\' format, instead of detecting it per file' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand import" -l source -d 'The traces\' source label (default: `import:<format>:<file name>`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand import" -l prefix -d 'Put this in front of every imported trace id' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand import" -l rejects -d 'Where rejected records go, as JSON Lines' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand import" -l redact-key -d 'Also redact the values of keys containing WORD (case and separators ignored)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand import" -l redact-pattern -d 'Also redact text matching REGEX inside every string (only its `secret` group, if named)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand import" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand import" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand import" -l no-redact -d 'Store everything as it is in the logs, secrets included'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand import" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand import" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand import" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l min-support -d 'A pattern must appear in at least this many distinct traces' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l min-length -d 'Shortest pattern (use 1 to count single tools, as the literature does)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l max-length -d 'Longest pattern (default: 10 when proposing candidates, unbounded with --count-only)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l max-gap -d 'Allow up to N unrelated calls between two steps of a pattern (sequences with gaps). Without it, patterns are contiguous' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l max-candidates -d 'Propose at most this many candidates (the best-ranked patterns)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l sample -d 'Infer each candidate\'s bindings from at most N of its occurrences, spread evenly over them (support, counts and support per day stay the full figures); `all` reads every occurrence' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l probe -d 'Infer a pattern with more occurrences first on N of them; when a step is then linked to no other (a flow padded with an unrelated call, or tools that merely follow each other), the candidate is built from those N. `off` reads the whole sample for every pattern' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l spmf -d 'With --count-only: mine this SPMF sequence file instead of the store' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l holdout -d 'Hold this percent of the traces (chosen by a hash of the trace id, the same on every run) out of mining, for `verify` to replay. Default: 0 for `mine`, 20 for `analyze`' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l engine -d 'Where the support counting runs. `datafusion` counts the closed patterns as Apache DataFusion query plans over the store\'s Parquet files in place (a SQLite store through its tool-name columns) and samples the occurrences of the best-ranked there (with --max-gap, in two passes over the tool names); bindings are inferred from that sample in-process and the candidates stored, the same as without an engine. `ballista` runs the counting plans on a Ballista cluster (see --scheduler), --max-gap too; this machine then finds the best-ranked patterns\' occurrences in streamed passes over the tool names and builds and stores the candidates the same way. Need a build with the `datafusion` or `ballista` feature' -r -f -a "in-process\t'The built-in miner'
datafusion\t'Apache DataFusion, embedded'
ballista\t'The same plans on a Ballista cluster (--scheduler)'"
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l scheduler -d 'With --engine ballista: the cluster\'s scheduler, e.g. `df://localhost:50050`. Its executors read the Parquet store\'s files by the paths this machine sees' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l engine-memory -d 'With --engine datafusion: the memory its sorts and groupings may hold, in MiB, before they spill to the temporary folder (default: half the machine\'s memory). The tables kept between pattern lengths always go there' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l query-timeout -d 'With --engine ballista: give up on a pattern length\'s query after this many seconds (default 1800). A job waits as long as the cluster has no executor (the scheduler runs a lost executor\'s tasks again on the others); the run then fails naming the scheduler, and nothing is stored' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l any-gap -d 'With --count-only: any gap at all (all frequent sequential patterns)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l count-only -d 'Only count the frequent patterns and print the time spent; store nothing'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l emit-sql -d 'Print the SQL that counts these closed contiguous patterns, with their support and occurrences, and exit without reading the store. It reads a relation named `steps` (columns trace_id, step_index, tool_name: the store\'s Parquet `steps` folder) and runs unchanged on Spark SQL, DuckDB and DataFusion'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -l all-frequent -d 'With --emit-sql or an --engine: every frequent contiguous pattern of the lengths asked for, closed or not (the counts the pattern mining literature publishes, with --min-length 1), instead of the closed ones `mine` stores'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand mine" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and not __fish_seen_subcommand_from list help" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and not __fish_seen_subcommand_from list help" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and not __fish_seen_subcommand_from list help" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and not __fish_seen_subcommand_from list help" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and not __fish_seen_subcommand_from list help" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and not __fish_seen_subcommand_from list help" -f -a "list" -d 'List the patterns the last `mine` stored, best-ranked first'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and not __fish_seen_subcommand_from list help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and __fish_seen_subcommand_from list" -l limit -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and __fish_seen_subcommand_from list" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and __fish_seen_subcommand_from list" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and __fish_seen_subcommand_from list" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the patterns the last `mine` stored, best-ranked first'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand patterns; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and not __fish_seen_subcommand_from list show export help" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and not __fish_seen_subcommand_from list show export help" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and not __fish_seen_subcommand_from list show export help" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and not __fish_seen_subcommand_from list show export help" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and not __fish_seen_subcommand_from list show export help" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and not __fish_seen_subcommand_from list show export help" -f -a "list" -d 'List the candidate flows, highest score first'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and not __fish_seen_subcommand_from list show export help" -f -a "show" -d 'Show one candidate: its steps, every binding with its confidence, and its evidence'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and not __fish_seen_subcommand_from list show export help" -f -a "export" -d 'Write a candidate\'s flow as a flow file (JSON), ready for `flows validate` and `run`'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and not __fish_seen_subcommand_from list show export help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from list" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from list" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from list" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from show" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from show" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from show" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from show" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from export" -s o -l output -d 'The file to write (default: standard output)' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from export" -l tool-schemas -d 'Also write the tool schemas inferred from the traces, as JSON, here' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from export" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from export" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from export" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from export" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from export" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the candidate flows, highest score first'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from help" -f -a "show" -d 'Show one candidate: its steps, every binding with its confidence, and its evidence'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from help" -f -a "export" -d 'Write a candidate\'s flow as a flow file (JSON), ready for `flows validate` and `run`'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand candidates; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verify" -l live -d 'Replay with live tools from this command-tool manifest instead of the recorded calls' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verify" -l ignore -d 'A volatile field left out when matching recorded calls and comparing replays: a JSON pointer, optionally for one tool (`/request_id`, `search:/nonce`, `/items/*/ts`). Repeatable' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verify" -l min-exact -d 'Share of exact replays at or above which a candidate is verified' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verify" -l min-partial -d 'Share of exact replays at or above which a candidate is partial (below: rejected)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verify" -l min-occurrences -d 'Fewer held-out occurrences than this and a candidate is rejected for lack of evidence' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verify" -l min-data-flow -d 'Reject candidates whose share of steps linked by data flow is below this. The default 1 asks every step to read from or feed another: unrelated calls that merely repeat together (or an agent\'s `think` padding a flow) replay trivially and prove nothing' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verify" -l max-occurrences -d 'Replay at most this many held-out occurrences per candidate' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verify" -l holdout -d 'Replay the traces this percent-hold-out split sets aside, instead of the split each candidate was mined with' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verify" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verify" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verify" -l allow-side-effects -d 'With --live: also run tools not marked `read_only = true` (they may change the world)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verify" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verify" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verify" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and not __fish_seen_subcommand_from list show help" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and not __fish_seen_subcommand_from list show help" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and not __fish_seen_subcommand_from list show help" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and not __fish_seen_subcommand_from list show help" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and not __fish_seen_subcommand_from list show help" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and not __fish_seen_subcommand_from list show help" -f -a "list" -d 'List the stored verdicts, verified first'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and not __fish_seen_subcommand_from list show help" -f -a "show" -d 'Show one verdict with its step differences (pointer, recorded, replayed)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and not __fish_seen_subcommand_from list show help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and __fish_seen_subcommand_from list" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and __fish_seen_subcommand_from list" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and __fish_seen_subcommand_from list" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and __fish_seen_subcommand_from show" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and __fish_seen_subcommand_from show" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and __fish_seen_subcommand_from show" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and __fish_seen_subcommand_from show" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the stored verdicts, verified first'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and __fish_seen_subcommand_from help" -f -a "show" -d 'Show one verdict with its step differences (pointer, recorded, replayed)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand verdicts; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand collect" -l listen -d 'The address to listen on (port 0 picks a free one; the address is printed on start)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand collect" -l max-queued-spans -d 'Spans waiting to be written before requests are answered 429' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand collect" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand collect" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand collect" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand collect" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand collect" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand record" -l trace-by -d 'How calls are grouped into traces: `session` (one trace per client session), `client` (per client name and version), or `request-meta:KEY` (per value of KEY in the tools/call request\'s `_meta`, such as a conversation id)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand record" -l shutdown-grace -d 'Seconds the server may take to exit after its stdin closes or a signal, before the next, harder signal' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand record" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand record" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand record" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand record" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand record" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and not __fish_seen_subcommand_from list show stats export compact convert help" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and not __fish_seen_subcommand_from list show stats export compact convert help" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and not __fish_seen_subcommand_from list show stats export compact convert help" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and not __fish_seen_subcommand_from list show stats export compact convert help" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and not __fish_seen_subcommand_from list show stats export compact convert help" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and not __fish_seen_subcommand_from list show stats export compact convert help" -f -a "list" -d 'List traces, filtered and paged'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and not __fish_seen_subcommand_from list show stats export compact convert help" -f -a "show" -d 'Show one trace with every step'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and not __fish_seen_subcommand_from list show stats export compact convert help" -f -a "stats" -d 'Per-tool statistics: calls, traces, error rate, latency p50/p95/p99 (interpolated linearly between the two nearest ranks; the TUI\'s Tools view shows the same figures)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and not __fish_seen_subcommand_from list show stats export compact convert help" -f -a "export" -d 'Write every trace as JSON Lines (one trace with its steps a line, readable by `import`), or as an event log for process-mining tools (PM4Py, ProM, Disco, Celonis): XES or OCEL 2.0 JSON, one case per trace, one event per call, the tool as activity'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and not __fish_seen_subcommand_from list show stats export compact convert help" -f -a "compact" -d 'Rewrite the store compactly, keeping what it holds. A Parquet dataset filled by many appends (a recorder\'s batches, imports, `collect`) holds many small part files, and every read opens each one: compaction merges each day partition\'s parts into files of up to about a million rows, keeping every row as written except trace rows a later append replaced. A SQLite store is vacuumed. If a recorder or `collect` commits an append while it runs, it stops without changing anything: run it again when appends pause. A reader that is mid-way through a read when the old files go may fail, and works when it reads again. Prints the files and bytes before and after (with `--format json`: `files_before`, `files_after`, `bytes_before`, `bytes_after`, `rows_rewritten`)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and not __fish_seen_subcommand_from list show stats export compact convert help" -f -a "convert" -d 'Copy every trace into another store: SQLite to Parquet or back, nothing lost'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and not __fish_seen_subcommand_from list show stats export compact convert help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -l tool -d 'Traces that call exactly this tool' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -l tool-contains -d 'Traces calling a tool whose name contains this text' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -l source -d 'Traces from this source (e.g. `tau-bench`, `recorder`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -l since -d 'Traces started at or after this time (`2026-11-01` or RFC 3339)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -l until -d 'Traces started before this time' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -l min-duration-ms -d 'Traces lasting at least this many milliseconds' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -l sort -d 'Order by this column' -r -f -a "stored\t''
id\t''
started\t''
steps\t''
errors\t''
duration\t''"
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -l limit -d 'At most this many traces' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -l offset -d 'Skip this many traces first (for paging)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -l errors -d 'Only traces with a failed step'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -l no-errors -d 'Only traces without a failed step'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -l desc -d 'Largest first'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from show" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from show" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from show" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from show" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from stats" -l tool -d 'Traces that call exactly this tool' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from stats" -l tool-contains -d 'Traces calling a tool whose name contains this text' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from stats" -l source -d 'Traces from this source (e.g. `tau-bench`, `recorder`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from stats" -l since -d 'Traces started at or after this time (`2026-11-01` or RFC 3339)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from stats" -l until -d 'Traces started before this time' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from stats" -l min-duration-ms -d 'Traces lasting at least this many milliseconds' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from stats" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from stats" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from stats" -l errors -d 'Only traces with a failed step'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from stats" -l no-errors -d 'Only traces without a failed step'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from stats" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from stats" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from stats" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from export" -s o -l output -d 'The file to write (`-` for standard output)' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from export" -l as -d 'What to write: `jsonl`, `xes` or `ocel`. By default taken from the output\'s extension (`.xes`, `.jsonocel` or `.ocel.json`), else `jsonl`. (`--format` is the global table/JSON choice for what the command prints.)' -r -f -a "jsonl\t'ChainWeaver\'s own JSON Lines, lossless'
xes\t'XES (IEEE 1849)'
ocel\t'OCEL 2.0 JSON'"
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from export" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from export" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from export" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from export" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from export" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from compact" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from compact" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from compact" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from compact" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from compact" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from convert" -l to -d 'The target store: a `.db` file, or a directory / `.parquet` path for Parquet' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from convert" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from convert" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from convert" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from convert" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from convert" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from help" -f -a "list" -d 'List traces, filtered and paged'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from help" -f -a "show" -d 'Show one trace with every step'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from help" -f -a "stats" -d 'Per-tool statistics: calls, traces, error rate, latency p50/p95/p99 (interpolated linearly between the two nearest ranks; the TUI\'s Tools view shows the same figures)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from help" -f -a "export" -d 'Write every trace as JSON Lines (one trace with its steps a line, readable by `import`), or as an event log for process-mining tools (PM4Py, ProM, Disco, Celonis): XES or OCEL 2.0 JSON, one case per trace, one event per call, the tool as activity'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from help" -f -a "compact" -d 'Rewrite the store compactly, keeping what it holds. A Parquet dataset filled by many appends (a recorder\'s batches, imports, `collect`) holds many small part files, and every read opens each one: compaction merges each day partition\'s parts into files of up to about a million rows, keeping every row as written except trace rows a later append replaced. A SQLite store is vacuumed. If a recorder or `collect` commits an append while it runs, it stops without changing anything: run it again when appends pause. A reader that is mid-way through a read when the old files go may fail, and works when it reads again. Prints the files and bytes before and after (with `--format json`: `files_before`, `files_after`, `bytes_before`, `bytes_after`, `rows_rewritten`)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from help" -f -a "convert" -d 'Copy every trace into another store: SQLite to Parquet or back, nothing lost'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand traces; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand tui" -l copy-file -d 'Where `y` also saves the copied JSON' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand tui" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand tui" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand tui" -l ascii -d 'Draw with ASCII only (also: CHAINWEAVER_ASCII=1)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand tui" -l no-color -d 'No colours (also: NO_COLOR=1)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand tui" -l no-mouse -d 'Leave the mouse to the terminal (native text selection, no wheel scrolling)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand tui" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand tui" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand tui" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and not __fish_seen_subcommand_from generate help" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and not __fish_seen_subcommand_from generate help" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and not __fish_seen_subcommand_from generate help" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and not __fish_seen_subcommand_from generate help" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and not __fish_seen_subcommand_from generate help" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and not __fish_seen_subcommand_from generate help" -f -a "generate" -d 'Generate realistic agent traffic with planted flows, noise calls, decoys and failures, plus a ground-truth file naming the planted flows and where each argument comes from'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and not __fish_seen_subcommand_from generate help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from generate" -l traces -d 'Number of traces' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from generate" -l seed -d 'Seed of the generator' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from generate" -l jsonl -d 'Write JSON Lines (one trace with its steps a line) here instead of into the store' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from generate" -l truth -d 'Where the ground truth goes' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from generate" -l failure-rate -d 'Probability that any one call fails' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from generate" -l decoy-rate -d 'Share of flow instances replaced by decoys (same tools, unrelated arguments)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from generate" -l interleave -d 'Probability of an unrelated call between two calls of a flow instance, for mining with `--max-gap`' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from generate" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from generate" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from generate" -l behaviours -d 'Also plant the hard behaviours: loops over a whole list and over the elements the agent picks, interchangeable first steps, an echoing step; a failed call cuts its flow instance short. The ground truth says where each loop and alternative is'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from generate" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from generate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from generate" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from help" -f -a "generate" -d 'Generate realistic agent traffic with planted flows, noise calls, decoys and failures, plus a ground-truth file naming the planted flows and where each argument comes from'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand datasets; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand run" -l flow-version -d 'With a registered flow name: the version to run (default: the newest active one)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand run" -l input -d 'The flow\'s initial input: a JSON object, or `@FILE` to read it from a file' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand run" -l tools -d 'A TOML manifest of command tools (repeatable)' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand run" -l param -d 'A dynamic parameter `KEY=VALUE` (VALUE as JSON when it parses, else as text). Reaches every step, never stored in the result' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand run" -l checkpoint-dir -d 'Save a checkpoint after every step in this folder (resume with `--resume`)' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand run" -l resume -d 'Resume the run with this trace id from `--checkpoint-dir`' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand run" -l save -d 'Also write the execution result and the flow that ran (JSON) to this file, for `chainweaver replay`' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand run" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand run" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand run" -l record -d 'Also store the run as a trace (source `flow`) in the store'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand run" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand run" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand run" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and not __fish_seen_subcommand_from validate list show register promote help" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and not __fish_seen_subcommand_from validate list show register promote help" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and not __fish_seen_subcommand_from validate list show register promote help" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and not __fish_seen_subcommand_from validate list show register promote help" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and not __fish_seen_subcommand_from validate list show register promote help" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and not __fish_seen_subcommand_from validate list show register promote help" -f -a "validate" -d 'Check flow files: structure always; tools, mappings, types and fallbacks with --tools'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and not __fish_seen_subcommand_from validate list show register promote help" -f -a "list" -d 'List the flows registered in the store'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and not __fish_seen_subcommand_from validate list show register promote help" -f -a "show" -d 'Show one registered flow (the newest active version unless --version)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and not __fish_seen_subcommand_from validate list show register promote help" -f -a "register" -d 'Register a flow file in the store (compiled first when --tools is given)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and not __fish_seen_subcommand_from validate list show register promote help" -f -a "promote" -d 'Register a verified candidate\'s flow as an active flow (refused for an unverified one unless --force)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and not __fish_seen_subcommand_from validate list show register promote help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from validate" -l tools -d 'Command-tool manifests declaring the tools the flows call' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from validate" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from validate" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from validate" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from validate" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from validate" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from list" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from list" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from list" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from show" -l flow-version -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from show" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from show" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from show" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from show" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from show" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from register" -l tools -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from register" -l status -d 'Lifecycle status: draft, active, deprecated or retired' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from register" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from register" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from register" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from register" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from register" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from promote" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from promote" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from promote" -l force -d 'Promote even without a `verified` verdict'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from promote" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from promote" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from promote" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from help" -f -a "validate" -d 'Check flow files: structure always; tools, mappings, types and fallbacks with --tools'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from help" -f -a "list" -d 'List the flows registered in the store'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from help" -f -a "show" -d 'Show one registered flow (the newest active version unless --version)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from help" -f -a "register" -d 'Register a flow file in the store (compiled first when --tools is given)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from help" -f -a "promote" -d 'Register a verified candidate\'s flow as an active flow (refused for an unverified one unless --force)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand flows; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand replay" -l mode -d '`verify` compares every step with the recording (alias `strict`); `execute` only runs (alias `skip_validation`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand replay" -l tools -d 'Command-tool manifests declaring the flow\'s tools' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand replay" -l flow -d 'The flow file to replay with; without it, the flow saved with the run (`run --save` keeps it), else the registered flow of the result\'s name and version' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand replay" -l param -d 'Dynamic parameters (`KEY=VALUE`) the original run had; they are never recorded' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand replay" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand replay" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand replay" -l allow-side-effects -d 'Allow tools whose manifest does not declare `read_only = true`'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand replay" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand replay" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand replay" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -l tools -d 'Tool manifests (command tools and [[mcp_server]] entries) the flows\' steps call (repeatable)' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -l http -d 'Serve streamable HTTP on this address (path /mcp) instead of stdio' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -l flow -d 'Serve only this flow, whatever its lifecycle (retired excepted) or safety (repeatable)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -l lifecycle -d 'Serve flows in this lifecycle (repeatable; default: active)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -l owner -d 'Serve only flows with this owner (`metadata.owner`; repeatable)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -l prefix -d 'Name served tools PREFIX__flow' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -l allow-tool -d 'With --chain-tools: a tool chains may call (repeatable; default: every tool of the manifests)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -l name -d 'The server name announced to clients' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -l allow-side-effects -d 'Also serve flows with side effects, that need approval, or whose safety is unknown'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -l chain-tools -d 'Let agents manage chain tools at runtime (create_dynamic_tool, list_dynamic_tools, update_dynamic_tool, disable_dynamic_tool, delete_dynamic_tool); chains persist in the store as flows'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -l no-create -d 'With --chain-tools: no create_dynamic_tool (existing chains can still be listed, run, updated, disabled and deleted)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -l list -d 'Print the tools that would be served and exit'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand serve" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and not __fish_seen_subcommand_from scheduler executor help" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and not __fish_seen_subcommand_from scheduler executor help" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and not __fish_seen_subcommand_from scheduler executor help" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and not __fish_seen_subcommand_from scheduler executor help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and not __fish_seen_subcommand_from scheduler executor help" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and not __fish_seen_subcommand_from scheduler executor help" -f -a "scheduler" -d 'A scheduler: clients (`mine --engine ballista --scheduler df://HOST:PORT`) submit their plans to it, executors poll it for tasks. Runs until stopped (Ctrl-C, SIGTERM)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and not __fish_seen_subcommand_from scheduler executor help" -f -a "executor" -d 'An executor: runs the plans\' tasks and serves their output to the other executors over Arrow Flight. Runs until stopped (Ctrl-C, SIGTERM) or told to by the scheduler'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and not __fish_seen_subcommand_from scheduler executor help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from scheduler" -l bind -d 'The address to listen on' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from scheduler" -l external-host -d 'The name executors and clients reach this machine by' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from scheduler" -l executor-timeout -d 'Seconds without a poll after which an executor counts as lost. A busy executor polls every 5 s, so at least 10' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from scheduler" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from scheduler" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from scheduler" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from scheduler" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from scheduler" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from executor" -l scheduler -d 'The scheduler to poll, as `mine --scheduler` takes it: `df://HOST:PORT`' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from executor" -l bind-host -d 'The host to listen on' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from executor" -l external-host -d 'The name the other executors reach this one by (default: the address the scheduler sees its polls come from)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from executor" -l port -d 'The Arrow Flight port, where the other executors fetch this one\'s shuffle output' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from executor" -l grpc-port -d 'The gRPC port' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from executor" -l slots -d 'Tasks run at once (default: the machine\'s cores)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from executor" -l work-dir -d 'Where shuffle output and spills go (default: a fresh folder in TMPDIR, removed at exit)' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from executor" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from executor" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from executor" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from executor" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from executor" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from help" -f -a "scheduler" -d 'A scheduler: clients (`mine --engine ballista --scheduler df://HOST:PORT`) submit their plans to it, executors poll it for tasks. Runs until stopped (Ctrl-C, SIGTERM)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from help" -f -a "executor" -d 'An executor: runs the plans\' tasks and serves their output to the other executors over Arrow Flight. Runs until stopped (Ctrl-C, SIGTERM) or told to by the scheduler'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand cluster; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand completions" -l store -d 'The store: a SQLite file, or a directory (or a path ending in `.parquet`) for a Parquet dataset. Created when missing' -r -F
complete -c chainweaver -n "__fish_chainweaver_using_subcommand completions" -l format -d 'How results are printed: `table` for people, `json` for scripts (documented field names, durations in seconds, a `schema_version`)' -r
complete -c chainweaver -n "__fish_chainweaver_using_subcommand completions" -s q -l quiet -d 'No progress bars'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand completions" -s h -l help -d 'Print help'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand completions" -s V -l version -d 'Print version'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "analyze" -d 'The main job: import agent logs, mine repeated tool sequences, and report candidate flows'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "import" -d 'Import agent logs into the store (format detected, or named with --input-format)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "mine" -d 'Mine the stored traces for repeated tool sequences and propose candidate flows'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "patterns" -d 'The patterns the last `mine` found'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "candidates" -d 'Candidate flows: list, show, export'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "verify" -d 'Replay candidates against held-out traffic and record their verdicts'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "verdicts" -d 'Verdicts of verified candidates: list, show'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "collect" -d 'Receive OpenTelemetry traces over OTLP/HTTP and store their tool calls'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "record" -d 'Stand in front of an MCP server (stdio) and record the tool calls it answers'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "traces" -d 'Inspect stored traces: list, show, stats, export, convert'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "tui" -d 'Browse traces, tools, patterns and candidates in the terminal'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "datasets" -d 'Generate synthetic agent traffic with planted flows'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "run" -d 'Run a flow file (or a registered flow) with command tools'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "flows" -d 'Validate flow files; list, show and register flows in the store'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "replay" -d 'Replay a saved execution result and compare it step by step'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "serve" -d 'Serve registered flows, and chain tools made at runtime, as MCP tools'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "cluster" -d 'Run a Ballista cluster\'s scheduler or an executor, for `mine --engine ballista`'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "completions" -d 'Print shell completions (bash, zsh, fish, elvish, powershell)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and not __fish_seen_subcommand_from analyze import mine patterns candidates verify verdicts collect record traces tui datasets run flows replay serve cluster completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from patterns" -f -a "list" -d 'List the patterns the last `mine` stored, best-ranked first'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from candidates" -f -a "list" -d 'List the candidate flows, highest score first'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from candidates" -f -a "show" -d 'Show one candidate: its steps, every binding with its confidence, and its evidence'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from candidates" -f -a "export" -d 'Write a candidate\'s flow as a flow file (JSON), ready for `flows validate` and `run`'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from verdicts" -f -a "list" -d 'List the stored verdicts, verified first'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from verdicts" -f -a "show" -d 'Show one verdict with its step differences (pointer, recorded, replayed)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from traces" -f -a "list" -d 'List traces, filtered and paged'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from traces" -f -a "show" -d 'Show one trace with every step'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from traces" -f -a "stats" -d 'Per-tool statistics: calls, traces, error rate, latency p50/p95/p99 (interpolated linearly between the two nearest ranks; the TUI\'s Tools view shows the same figures)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from traces" -f -a "export" -d 'Write every trace as JSON Lines (one trace with its steps a line, readable by `import`), or as an event log for process-mining tools (PM4Py, ProM, Disco, Celonis): XES or OCEL 2.0 JSON, one case per trace, one event per call, the tool as activity'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from traces" -f -a "compact" -d 'Rewrite the store compactly, keeping what it holds. A Parquet dataset filled by many appends (a recorder\'s batches, imports, `collect`) holds many small part files, and every read opens each one: compaction merges each day partition\'s parts into files of up to about a million rows, keeping every row as written except trace rows a later append replaced. A SQLite store is vacuumed. If a recorder or `collect` commits an append while it runs, it stops without changing anything: run it again when appends pause. A reader that is mid-way through a read when the old files go may fail, and works when it reads again. Prints the files and bytes before and after (with `--format json`: `files_before`, `files_after`, `bytes_before`, `bytes_after`, `rows_rewritten`)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from traces" -f -a "convert" -d 'Copy every trace into another store: SQLite to Parquet or back, nothing lost'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from datasets" -f -a "generate" -d 'Generate realistic agent traffic with planted flows, noise calls, decoys and failures, plus a ground-truth file naming the planted flows and where each argument comes from'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from flows" -f -a "validate" -d 'Check flow files: structure always; tools, mappings, types and fallbacks with --tools'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from flows" -f -a "list" -d 'List the flows registered in the store'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from flows" -f -a "show" -d 'Show one registered flow (the newest active version unless --version)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from flows" -f -a "register" -d 'Register a flow file in the store (compiled first when --tools is given)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from flows" -f -a "promote" -d 'Register a verified candidate\'s flow as an active flow (refused for an unverified one unless --force)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from cluster" -f -a "scheduler" -d 'A scheduler: clients (`mine --engine ballista --scheduler df://HOST:PORT`) submit their plans to it, executors poll it for tasks. Runs until stopped (Ctrl-C, SIGTERM)'
complete -c chainweaver -n "__fish_chainweaver_using_subcommand help; and __fish_seen_subcommand_from cluster" -f -a "executor" -d 'An executor: runs the plans\' tasks and serves their output to the other executors over Arrow Flight. Runs until stopped (Ctrl-C, SIGTERM) or told to by the scheduler'
