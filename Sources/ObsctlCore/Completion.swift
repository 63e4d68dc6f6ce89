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

    /// A command's options and the global ones it does not define itself, as obsctl parses them.
    static func options(_ command: Command) -> [String] {
        (command.spec.options + globalOptions.filter { command.spec.option(named: $0.key) == nil }).flatMap(\.names)
    }

    /// The options before a command name.
    static var topLevelOptions: [String] { globalOptions.flatMap(\.names) + ["--version"] }

    /// Options whose value is not a file: nothing is completed after them (after --socket, files are).
    static var valueOptions: [String] {
        (globalOptions + commandTable.flatMap(\.spec.options)).filter { $0.value != nil && $0.key != "--socket" }.flatMap(\.names)
            .reduce(into: []) { if !$0.contains($1) { $0.append($1) } }
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
                # The command is the first word that is not an option; --socket may come before or after it.
                for ((i = 1; i < COMP_CWORD; i++)); do
                    case ${COMP_WORDS[i]} in
                        --) break ;;
                        --socket) socket=(--socket "${COMP_WORDS[i+1]}"); ((i++)) ;;
                        --timeout) ((i++)) ;;
                        -*) ;;
                        *) [[ -z $command ]] && command=${COMP_WORDS[i]} ;;
                    esac
                done
                case $prev in
                    --socket) COMPREPLY=($(compgen -f -- "$cur")); return ;;
                    \(valueOptions.joined(separator: "|"))) return ;;
                esac
                if [[ -z $command ]]; then
                    COMPREPLY=($(compgen -W "$commands \(topLevelOptions.joined(separator: " "))" -- "$cur"))
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
                local -a commands opts keys keycommands socket
                commands=(\(described.joined(separator: " ")))
                keycommands=(\(keyCommands.sorted().joined(separator: " ")))
                # The command is the first word that is not an option; --socket may come before or after it.
                local command= i=2
                while (( i < CURRENT )); do
                    case ${words[i]} in
                        --) break ;;
                        --socket) socket=(--socket ${(Q)words[i+1]}); (( i++ )) ;;
                        --timeout) (( i++ )) ;;
                        -*) ;;
                        *) [[ -z $command ]] && command=${words[i]} ;;
                    esac
                    (( i++ ))
                done
                case ${words[CURRENT-1]} in
                    --socket) _files; return ;;
                    \(valueOptions.joined(separator: "|"))) return ;;
                esac
                if [[ -z $command ]]; then
                    if [[ ${words[CURRENT]} == -* ]]; then
                        compadd -- \(topLevelOptions.joined(separator: " "))
                    else
                        _describe 'command' commands
                    fi
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
                    keys=(${(f)"$(obsctl $socket --timeout 2s list 2>/dev/null | cut -d' ' -f1)"})
                    compadd -- $keys
                fi
            }
            _obsctl "$@"

            """
    }

    static var fish: String {
        var lines = #"""
            # obsctl completion for fish: obsctl completion fish > ~/.config/fish/completions/obsctl.fish

            # The command is the first word that is not an option (--socket and --timeout take a value).
            function __obsctl_command
                set -l words (commandline -opc)
                set -l i 2
                while test $i -le (count $words)
                    switch $words[$i]
                        case --socket --timeout
                            set i (math $i + 1)
                        case '-*'
                        case '*'
                            echo $words[$i]
                            return 0
                    end
                    set i (math $i + 1)
                end
                return 1
            end

            function __obsctl_needs_command
                not __obsctl_command >/dev/null
            end

            function __obsctl_using
                set -l command (__obsctl_command); and contains -- $command $argv
            end

            # Key names from the daemon the line talks to: the line's --socket, before or after the command.
            function __obsctl_keys
                set -l words (commandline -opc)
                set -l socket
                set -l i 2
                while test $i -lt (count $words)
                    switch $words[$i]
                        case --
                            break
                        case --socket
                            set socket --socket $words[(math $i + 1)]
                    end
                    set i (math $i + 1)
                end
                obsctl $socket --timeout 2s list 2>/dev/null | string split -f1 ' '
            end

            complete -c obsctl -f

            """#
        // A global option is offered before the command, and after it unless the command has its own.
        for option in globalOptions {
            let owners = commandTable.filter { $0.spec.option(named: option.key) != nil }.map(\.name)
            let condition = owners.isEmpty ? "" : " -n 'not __obsctl_using \(owners.joined(separator: " "))'"
            let value = option.key == "--socket" ? " -r -F" : option.value == nil ? "" : " -x"
            lines += "complete -c obsctl\(condition) \(fishNames(option))\(value) -d \(fishQuoted(option.help))\n"
        }
        lines += "complete -c obsctl -n __obsctl_needs_command -l version -d 'Print the version and exit.'\n"
        for command in commandTable {
            lines += "complete -c obsctl -n '__obsctl_needs_command; or __obsctl_using help' -a \(command.name) -d \(fishQuoted(command.spec.summary))\n"
        }
        for command in commandTable {
            for option in command.spec.options {
                lines += "complete -c obsctl -n '__obsctl_using \(command.name)' \(fishNames(option))\(option.value == nil ? "" : " -x") -d \(fishQuoted(option.help))\n"
            }
        }
        lines += """
            complete -c obsctl -n '__obsctl_using \(keyCommands.sorted().joined(separator: " "))' -a '(__obsctl_keys)'
            complete -c obsctl -n '__obsctl_using completion' -a 'bash zsh fish'
            complete -c obsctl -n '__obsctl_using apply' -F

            """
        return lines
    }

    static func fishNames(_ option: OptionSpec) -> String {
        option.names.map { $0.hasPrefix("--") ? "-l \($0.dropFirst(2))" : "-s \($0.dropFirst())" }.joined(separator: " ")
    }

    static func fishQuoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
    }
}
