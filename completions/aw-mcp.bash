# bash completion for aw-mcp
_aw_mcp() {
	local cur prev
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	case $prev in
	--root) COMPREPLY=($(compgen -d -- "$cur")); return ;;
	-i|--instance)
		COMPREPLY=($(compgen -W "$(ls "${AW_ROOT:-.workflow}" 2>/dev/null)" -- "$cur")); return ;;
	-a|--agent|--max-workers|--spawn-depth) return ;;
	esac
	COMPREPLY=($(compgen -W "-a --agent --collab --delegate --create --max-workers --spawn-depth --root -i --instance -h --help -V --version" -- "$cur"))
}
complete -F _aw_mcp aw-mcp
