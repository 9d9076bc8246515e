# bash completion for memlens; installed by `cmake --install` under
# share/bash-completion/completions/memlens (bash-completion loads it on
# demand). The options are those of each verb's --help.

_memlens() {
    local cur prev verb i
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    verb=
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        run | attach | report | diff | view | dump) verb=${COMP_WORDS[i]}; break ;;
        esac
    done
    if [[ -z $verb ]]; then
        COMPREPLY=($(compgen -W "run attach report diff view dump --version --help" -- "$cur"))
        return
    fi
    # After `run ... --` the words are the program's: complete commands, then files.
    if [[ $verb == run ]]; then
        for ((i = 2; i < COMP_CWORD; i++)); do
            if [[ ${COMP_WORDS[i]} == -- ]]; then
                if ((i + 1 == COMP_CWORD)); then
                    COMPREPLY=($(compgen -c -- "$cur"))
                else
                    COMPREPLY=($(compgen -f -- "$cur"))
                fi
                return
            fi
        done
    fi
    case $prev in
    -o | --output | --json | --html | --folded | --pprof | --speedscope | --suppressions)
        COMPREPLY=($(compgen -f -- "$cur"))
        return ;;
    --unwind) COMPREPLY=($(compgen -W "libunwind fp" -- "$cur")); return ;;
    --folded-metric | --by-process) COMPREPLY=($(compgen -W "alloc calls peak leaked temporary" -- "$cur")); return ;;
    --sample | --depth | --fail-on-leak | --max-peak | --fail-on-gpu-leak | --max-gpu-peak | \
    --max-sites | --fail-on-increase | --top | --keys | --size | --duration)
        return ;;
    esac
    local opts
    case $verb in
    run) opts="-o --output --follow-fork --sample --unwind --depth --no-gpu --gpu-pools --no-snapshot --live --force --group-readable -q --quiet --help --" ;;
    attach) opts="-o --output --duration --force --group-readable -q --quiet --help" ;;
    report) opts="--json --json-compact --html --folded --pprof --speedscope --folded-metric --fail-on-leak --max-peak --fail-on-gpu-leak --max-gpu-peak --suppressions --alloc-fn --max-sites --no-symbols --no-advisor --all-policies --advisor-mem --advisor-ops --replay --no-save-advice --by-process --allow-incomplete --summary --force --group-readable -q --quiet --help" ;;
    diff) opts="--json --fail-on-increase --allow-incomplete --suppressions --alloc-fn --top --no-symbols --force --group-readable -q --quiet --help" ;;
    view) opts="--no-color --no-mouse --ascii --no-suggestions --batch --keys --size --replay --history-mb --advisor-mem --advisor-ops --alloc-fn --help" ;;
    dump) opts="--help" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    elif [[ $verb == attach ]]; then
        COMPREPLY=($(compgen -W "$(cd /proc && ls -d [0-9]* 2>/dev/null)" -- "$cur"))
    elif [[ $verb != run ]]; then
        COMPREPLY=($(compgen -o plusdirs -f -X '!*.mlt' -- "$cur"))
    fi
}
complete -o filenames -F _memlens memlens
