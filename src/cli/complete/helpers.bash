# Helpers shared by the aw completions (every generated file holds them).

# Split the line up to the cursor into words: sets words, cword, cur, prev.
# A plain split on white space, so that agent@instance stays one word.
_aw_words() {
    local line=${COMP_LINE:0:COMP_POINT}
    read -ra words <<<"$line"
    [[ -z $line || $line == *[[:space:]] ]] && words+=("")
    cword=$((${#words[@]} - 1))
    cur=${words[cword]}
    prev=
    ((cword > 0)) && prev=${words[cword - 1]}
}

# The nearest .workflow in the current directory or above, else .workflow.
_aw_find_root() {
    local d=$PWD
    while [[ -n $d ]]; do
        [[ -d $d/.workflow ]] && { printf '%s\n' "$d/.workflow"; return; }
        d=${d%/*}
    done
    printf '%s\n' .workflow
}

# Find --root and -i/--instance before the cursor: sets root and inst.
_aw_where() {
    local i w
    root=${AW_ROOT:-$(_aw_find_root)}
    inst=${AW_INSTANCE:-default}
    for ((i = 1; i < cword; i++)); do
        w=${words[i]}
        case $w in
        --root) ((i + 1 < cword)) && root=${words[i + 1]} ;;
        --root=*) root=${w#--root=} ;;
        -i | --instance) ((i + 1 < cword)) && inst=${words[i + 1]} ;;
        --instance=*) inst=${w#--instance=} ;;
        -i?*) inst=${w#-i} ;;
        esac
    done
    [[ $root == "~"* ]] && root=$HOME${root#"~"}
}

# Instance names under the root $1.
_aw_instances() {
    local d n
    for d in "$1"/*/; do
        [[ -d $d ]] || continue
        n=${d%/}
        n=${n##*/}
        [[ $n =~ ^[A-Za-z0-9][A-Za-z0-9_-]*$ ]] && printf '%s\n' "$n"
    done
}

# Agent names registered in instance $2 under root $1.
_aw_agents() {
    local f=$1/$2/_state/agents.json
    [[ -r $f ]] || return 0
    sed -n 's/^ *"name": *"\([A-Za-z][A-Za-z0-9_-]*\)".*/\1/p' "$f"
}

# Targets: agents of instance $2 and @instance; agent@instance once an @ is typed.
_aw_targets() {
    local i a
    if [[ $cur == ?*@* ]]; then
        for i in $(_aw_instances "$1"); do
            for a in $(_aw_agents "$1" "$i"); do
                printf '%s@%s\n' "$a" "$i"
            done
        done
    else
        _aw_agents "$1" "$2"
        for i in $(_aw_instances "$1"); do
            printf '@%s\n' "$i"
        done
    fi
}

# Documents of instance $2 under root $1, as relative paths.
_aw_documents() {
    local dir=$1/$2/documents
    [[ -d $dir ]] || return 0
    (cd "$dir" && find . -type f ! -path '*/.*' 2>/dev/null) | sed 's|^\./||'
}

# Set COMPREPLY to the candidates (one per line on stdin) that start with $cur.
# Bash replaces only the part of the word from the last COMP_WORDBREAKS
# character on (after it, except for @ and $, which it keeps in the word), so
# the part before is cut from each candidate.
_aw_reply() {
    local c keep= i
    for ((i = ${#cur} - 1; i >= 0; i--)); do
        case ${cur:i:1} in
        @ | \$) keep=${cur:0:i} ;;
        *) keep=${cur:0:i+1} ;;
        esac
        [[ $COMP_WORDBREAKS == *"${cur:i:1}"* ]] && break
        keep=
    done
    COMPREPLY=()
    while IFS= read -r c; do
        [[ $c == "$cur"* ]] && COMPREPLY+=("${c#"$keep"}")
    done
}

# Complete directories, or files with -f.
_aw_paths() {
    compopt -o filenames 2>/dev/null
    if [[ $1 == -f ]]; then
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    else
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
    fi
}

