# fish completion for aw-mcp
complete -c aw-mcp -s a -l agent -x -d 'Agent this server speaks for (NAME[@INSTANCE])'
complete -c aw-mcp -l root -r -a '(__fish_complete_directories)' -d 'Root directory'
complete -c aw-mcp -s i -l instance -x -a '(command ls $AW_ROOT .workflow 2>/dev/null)' -d 'Instance'
complete -c aw-mcp -s h -l help -d 'Print help'
complete -c aw-mcp -s V -l version -d 'Print version'
