import ObsClient

/// `obsctl completion bash|zsh|fish`: scripts generated from the command table. Key names come
/// from the running daemon (`obsctl list`) for commands whose first argument is a key.
enum Completion {
    /// Commands whose positional arguments name keys or patterns.
    static let keyCommands: Set<String> = ["get", "set", "del", "incr", "define", "bind", "unbind", "watch", "describe", "list", "graph"]

    static func run(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        switch parsed.positionals[0] {
        case "bash": context.output.raw(bash)
        case "zsh": context.output.raw(zsh)
        case "fish": context.output.raw(fish)
        default: throw UsageError("completion: unknown shell '\(parsed.positionals[0])' (bash, zsh or fish)")
        }
        return 0
    }

    static func options(_ command: Command) -> [String] {
        (command.spec.options + globalOptions).flatMap(\.names).reduce(into: []) { if !$0.contains($1) { $0.append($1) } }
    }

    static var bash: String {
        var cases = ""
        for command in commandTable {
            cases += "        \(command.name)) opts=\"\(options(command).joined(separator: " "))\"; keys=\(keyCommands.contains(command.name) ? 1 : 0) ;;\n"
        }
        return """
            # obsctl completion for bash: source <(obsctl completion bash)
            _obsctl() {
                local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
                local commands="\(commandTable.map(\.name).joined(separator: " "))"
                local command="" i socket=()
                for ((i = 1; i < COMP_CWORD; i++)); do
                    case ${COMP_WORDS[i]} in
                        --socket) socket=(--socket "${COMP_WORDS[i+1]}"); ((i++)) ;;
                        --timeout) ((i++)) ;;
                        -*) ;;
                        *) command=${COMP_WORDS[i]}; break ;;
                    esac
                done
                case $prev in
                    --socket) COMPREPLY=($(compgen -f -- "$cur")); return ;;
                    --timeout|--throttle|--debounce|--ttl|--since|--if-rev|-n|--format|--map|--unmap) return ;;
                esac
                if [[ -z $command ]]; then
                    COMPREPLY=($(compgen -W "$commands --socket --timeout --help --version" -- "$cur"))
                    return
                fi
                local opts="" keys=0
                case $command in
            \(cases)    esac
                if [[ $cur == -* ]]; then
                    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
                elif [[ $command == help ]]; then
                    COMPREPLY=($(compgen -W "$commands" -- "$cur"))
                elif [[ $command == completion ]]; then
                    COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur"))
                elif [[ $command == apply ]]; then
                    COMPREPLY=($(compgen -f -- "$cur"))
                elif ((keys)); then
                    COMPREPLY=($(compgen -W "$(obsctl "${socket[@]}" --timeout 2s list 2>/dev/null | cut -d' ' -f1)" -- "$cur"))
                fi
            }
            complete -F _obsctl obsctl

            """
    }

    static var zsh: String {
        var lines = ""
        for command in commandTable {
            lines += "        \(command.name)) opts=(\(options(command).joined(separator: " "))) ;;\n"
        }
        let described = commandTable.map { "'\($0.name):\($0.spec.summary.replacingOccurrences(of: "'", with: "'\\''"))'" }
        return """
            #compdef obsctl
            # obsctl completion for zsh: obsctl completion zsh > "${fpath[1]}/_obsctl"
            _obsctl() {
                local -a commands opts keys keycommands
                commands=(\(described.joined(separator: " ")))
                keycommands=(\(keyCommands.sorted().joined(separator: " ")))
                local command= i=2
                while (( i < CURRENT )); do
                    case ${words[i]} in
                        --socket|--timeout) (( i++ )) ;;
                        -*) ;;
                        *) command=${words[i]}; break ;;
                    esac
                    (( i++ ))
                done
                if [[ -z $command ]]; then
                    _describe 'command' commands
                    return
                fi
                case $command in
            \(lines)    esac
                if [[ ${words[CURRENT]} == -* ]]; then
                    compadd -- $opts
                elif [[ $command == help ]]; then
                    compadd -- ${commands%%:*}
                elif [[ $command == completion ]]; then
                    compadd -- bash zsh fish
                elif [[ $command == apply ]]; then
                    _files
                elif (( ${keycommands[(I)$command]} )); then
                    keys=(${(f)"$(obsctl --timeout 2s list 2>/dev/null | cut -d' ' -f1)"})
                    compadd -- $keys
                fi
            }
            _obsctl "$@"

            """
    }

    static var fish: String {
        var lines = """
            # obsctl completion for fish: obsctl completion fish > ~/.config/fish/completions/obsctl.fish
            complete -c obsctl -f
            complete -c obsctl -n '__fish_use_subcommand' -l socket -r -d 'The daemon socket'
            complete -c obsctl -n '__fish_use_subcommand' -l timeout -x -d 'Give up after DURATION'
            complete -c obsctl -n '__fish_use_subcommand' -l version -d 'Print the version'

            """
        for command in commandTable {
            lines += "complete -c obsctl -n '__fish_use_subcommand' -a \(command.name) -d '\(command.spec.summary.replacingOccurrences(of: "'", with: "\\'"))'\n"
        }
        for command in commandTable {
            for option in command.spec.options {
                let names = option.names.map { $0.hasPrefix("--") ? "-l \($0.dropFirst(2))" : "-s \($0.dropFirst())" }.joined(separator: " ")
                lines += "complete -c obsctl -n '__fish_seen_subcommand_from \(command.name)' \(names)\(option.value == nil ? "" : " -x") -d '\(option.help.replacingOccurrences(of: "'", with: "\\'"))'\n"
            }
            if keyCommands.contains(command.name) {
                lines += "complete -c obsctl -n '__fish_seen_subcommand_from \(command.name)' -a '(obsctl --timeout 2s list 2>/dev/null | string split -f1 \" \")'\n"
            }
        }
        return lines
    }
}
