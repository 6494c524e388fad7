# pipelab.bash: bash completion for pipelab (installed as share/bash-completion/completions/pipelab).
#
# Everything it offers is read, at completion time, from the help texts of the pipelab being
# completed (`pipelab --help`, `pipelab CMD --help`), so it cannot drift from the program:
#   pipelab sim<TAB>              subcommands (the "commands:" section of `pipelab --help`)
#   pipelab simulate --mic<TAB>   flags (the option column of `pipelab simulate --help`)
#   pipelab run --backend <TAB>   values written as a|b|c after a flag (cpu cuda)
#   pipelab db <TAB>              the "subcommands:" or "kinds:" of a subcommand (db, plot)
# Anything else completes file names. The build also reads the subcommands through
# _pipelab_entries to name the man pages (cmake/man_pages.cmake).

# Prints the entries of section SECTION ("commands", "subcommands", "kinds") of the help text on
# stdin, one "NAME<TAB>SUMMARY" a line: the lines indented by exactly two spaces after the line
# "SECTION:", up to the next blank line. Deeper lines continue an entry and are skipped.
_pipelab_entries() {
    local section=$1 line inside=0 re='^  ([a-z][a-z0-9-]*) +(.*)$'
    while IFS= read -r line; do
        if [[ $line == "$section:" ]]; then
            inside=1
        elif ((inside)) && [[ -z $line ]]; then
            return 0
        elif ((inside)) && [[ $line =~ $re ]]; then
            printf '%s\t%s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
        fi
    done
}

# Prints the option column of the help text on stdin, one line per option line, its words
# separated by single spaces and without brackets: a line whose first non-blank character is
# '-', from there up to the description (which starts after two or more spaces), e.g.
# "--kind K --ranks P --chunks V" or "-o, --output FILE".
_pipelab_option_specs() {
    local line spec
    while IFS= read -r line; do
        spec=${line#"${line%%[! ]*}"}
        [[ $spec == -* ]] || continue
        spec=${spec%%  *}
        spec=${spec//\[/}
        printf '%s\n' "${spec//\]/}"
    done
}

# Prints the flags of the help text on stdin, each once, one a line (-o, --output, ..., --help):
# every word of the option column that is a flag, without a trailing comma or "=VALUE".
_pipelab_flags() {
    local spec word words re='^(--?[A-Za-z0-9][A-Za-z0-9-]*)(=.*)?$'
    local -A seen=([--help]=1)
    while IFS= read -r spec; do
        read -r -a words <<<"$spec"
        for word in "${words[@]}"; do
            [[ ${word%,} =~ $re && -z ${seen[${BASH_REMATCH[1]}]-} ]] || continue
            seen[${BASH_REMATCH[1]}]=1
            printf '%s\n' "${BASH_REMATCH[1]}"
        done
    done < <(_pipelab_option_specs)
    printf '%s\n' --help
}

# Prints what flag FLAG takes in the help text on stdin: the option column's word after it
# (FILE, N, table|csv|json), or after its last alias ("-o, --output FILE": FILE for -o); nothing
# when the flag takes no value.
_pipelab_argument() {
    local flag=$1 spec words i j next
    while IFS= read -r spec; do
        read -r -a words <<<"$spec"
        for ((i = 0; i < ${#words[@]}; i++)); do
            [[ ${words[i]%,} == "$flag" ]] || continue
            j=$i
            while [[ ${words[j]} == *, && ${words[j + 1]} == -* ]]; do j=$((j + 1)); done
            next=${words[j + 1]%,}
            [[ -n $next && $next != -* ]] && printf '%s\n' "$next" && return 0
        done
    done < <(_pipelab_option_specs)
}

# The completion function: fills COMPREPLY for the word COMP_WORDS[COMP_CWORD] of a pipelab
# command line; an empty COMPREPLY leaves it to bash's file-name completion (complete -o default).
_pipelab() {
    local bin=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
    local help words arg i
    COMPREPLY=()
    [[ $bin == \~/* ]] && bin=$HOME/${bin#\~/}  # a typed ~/path: bash has not expanded it
    if ((COMP_CWORD == 1)); then
        words=$("$bin" --help 2>/dev/null | _pipelab_entries commands | cut -f1)
        mapfile -t COMPREPLY < <(compgen -W "$words --help --version" -- "$cur")
        return 0
    fi
    help=$("$bin" "${COMP_WORDS[1]}" --help 2>/dev/null) || return 0
    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(_pipelab_flags <<<"$help")" -- "$cur")
        return 0
    fi
    if [[ $prev == -* ]]; then
        arg=$(_pipelab_argument "$prev" <<<"$help")
        [[ $arg =~ ^[a-z0-9_-]+(\|[a-z0-9_-]+)+$ ]] &&
            mapfile -t COMPREPLY < <(compgen -W "${arg//|/ }" -- "$cur")
        [[ -n $arg ]] && return 0
    fi
    words=$({ _pipelab_entries subcommands; _pipelab_entries kinds; } <<<"$help" | cut -f1)
    for ((i = 2; i < COMP_CWORD; i++)); do
        [[ $'\n'$words$'\n' == *$'\n'"${COMP_WORDS[i]}"$'\n'* ]] && return 0
    done
    mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
}

complete -o default -F _pipelab pipelab
