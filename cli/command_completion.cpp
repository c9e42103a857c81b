// `moequant completion bash|zsh`: a shell completion script. The commands are written into the
// script; each command's options, and the choices or file names their values take, are read
// from `moequant COMMAND --help` the first time a shell completes that command (then kept), so
// the script never falls behind the host or its plugins' options. The bash and zsh scripts
// walk the words alike, each in its shell's own syntax.
#include "command.hpp"
#include "global_options.hpp"

#include <moequant/error.hpp>

#include <boost/program_options.hpp>

#include <iostream>

namespace moequant::cli {

namespace {

// Turns `moequant COMMAND --help` into one "--option<TAB>value" line per option: value empty
// for a switch, "a|b|c" for choices, anything else (PATH, FILE, arg, ...) for a free value.
// Boost.Program_options writes "  --name VALUE (=default)   help" and "  -x [ --name ] VALUE".
constexpr const char* help_to_options_awk = R"AWK(/^  -/ {
    line = $0
    if (match(line, /\[ --[^ ]+ \]/)) { name = substr(line, RSTART + 2, RLENGTH - 4); rest = substr(line, RSTART + RLENGTH) }
    else if (match(line, /--[^ ]+/)) { name = substr(line, RSTART, RLENGTH); rest = substr(line, RSTART + RLENGTH) }
    else next
    value = ""
    if (rest ~ /^ [^ (]/) { split(substr(rest, 2), parts, " "); value = parts[1] }
    print name "\t" value
})AWK";

// Both scripts find the command alike: the first word typed that is neither an option nor the
// value of a global option that takes one. @WORDS@ is the shell's array of the words, @FIRST@
// the index of the first after the host, @CURRENT@ the index of the word being completed.
constexpr const char* find_command = R"SH(for ((i = @FIRST@; i < @CURRENT@; i++)); do
        case ${@WORDS@[i]} in
            --plugin|--plugin-dir) ((i++)) ;;
            -*) ;;
            *) cmd=${@WORDS@[i]}; break ;;
        esac
    done)SH";

constexpr const char* bash_script = R"BASH(# bash completion for moequant: eval "$(moequant completion bash)"
declare -gA _moequant_cache
_moequant_options() {  # prints "--option<TAB>value" for command $2 of the host $1, read once per shell
    local key="$1 $2"
    [[ -v _moequant_cache[$key] ]] || _moequant_cache[$key]=$("$1" "$2" --help 2>/dev/null | awk '@AWK@')
    printf '%s\n' "${_moequant_cache[$key]}"
}

_moequant() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} host=${COMP_WORDS[0]} cmd="" i
    @FIND_COMMAND@
    COMPREPLY=()
    if [[ -z $cmd ]]; then
        case $prev in
            --plugin) COMPREPLY=($(compgen -f -- "$cur")); return ;;
            --plugin-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
        esac
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--help --version --plugin --plugin-dir --no-default-plugins" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "@COMMANDS@" -- "$cur"))
        fi
        return
    fi
    if [[ $cmd == completion ]]; then
        COMPREPLY=($(compgen -W "bash zsh" -- "$cur"))
        return
    fi
    local options name value names=""
    options=$(_moequant_options "$host" "$cmd")
    if [[ $prev == -* ]]; then
        value=$(awk -F '\t' -v o="$prev" '$1 == o { print $2 }' <<<"$options")
        if [[ $value == *"|"* ]]; then
            COMPREPLY=($(compgen -W "${value//|/ }" -- "$cur"))
            return
        elif [[ -n $value ]]; then
            COMPREPLY=($(compgen -f -- "$cur"))
            return
        fi
    fi
    if [[ $cur == -* ]]; then
        while IFS=$'\t' read -r name value; do names+=" $name"; done <<<"$options"
        COMPREPLY=($(compgen -W "$names" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -o filenames -F _moequant moequant
)BASH";

constexpr const char* zsh_script = R"ZSH(#compdef moequant
# zsh completion for moequant: eval "$(moequant completion zsh)", or save it as _moequant in $fpath
typeset -gA _moequant_cache
_moequant_options() {  # prints "--option<TAB>value" for command $2 of the host $1, read once per shell
    local key="$1 $2"
    (( ${+_moequant_cache[$key]} )) || _moequant_cache[$key]=$("$1" "$2" --help 2>/dev/null | awk '@AWK@')
    print -r -- "${_moequant_cache[$key]}"
}

_moequant() {
    local host=${words[1]} cmd="" i
    @FIND_COMMAND@
    local cur=${words[CURRENT]} prev=${words[CURRENT-1]}
    if [[ -z $cmd ]]; then
        case $prev in
            --plugin) _files; return ;;
            --plugin-dir) _files -/; return ;;
        esac
        if [[ $cur == -* ]]; then
            compadd -- --help --version --plugin --plugin-dir --no-default-plugins
        else
            compadd -- @COMMANDS@
        fi
        return
    fi
    if [[ $cmd == completion ]]; then
        compadd -- bash zsh
        return
    fi
    local options value
    local -a names
    options=$(_moequant_options "$host" "$cmd")
    if [[ $prev == -* ]]; then
        value=$(awk -F '\t' -v o="$prev" '$1 == o { print $2 }' <<<"$options")
        if [[ $value == *"|"* ]]; then
            compadd -- ${(s:|:)value}
            return
        elif [[ -n $value ]]; then
            _files
            return
        fi
    fi
    if [[ $cur == -* ]]; then
        names=(${(f)"$(awk -F '\t' '{ print $1 }' <<<"$options")"})
        compadd -- $names
    else
        _files
    fi
}
if [[ $funcstack[1] == _moequant ]]; then _moequant "$@"; else compdef _moequant moequant; fi
)ZSH";

struct ShellScript {
    const char* text;
    const char* words;          // @WORDS@
    const char* first_word;     // @FIRST@
    const char* current_word;   // @CURRENT@
};

constexpr ShellScript bash{bash_script, "COMP_WORDS", "1", "COMP_CWORD"};
constexpr ShellScript zsh{zsh_script, "words", "2", "CURRENT"};

std::string replaced(std::string text, const std::string& marker, const std::string& with) {
    for (std::size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + with.size()))
        text.replace(at, marker.size(), with);
    return text;
}

}  // namespace

int run_completion_command(const std::vector<std::string>& args, GlobalOptions globals) {
    namespace po = boost::program_options;
    std::string shell;
    bool help = false;
    po::options_description options("Options");
    options.add_options()("help,h", po::bool_switch(&help), "show this help");
    options.add(global_option_group(globals));
    po::positional_options_description positional;
    positional.add("shell", 1);
    po::options_description hidden;
    hidden.add_options()("shell", po::value(&shell));
    po::options_description all;
    all.add(options).add(hidden);
    parse_command_line(args, all, positional);
    if (help) {
        print_command_help("moequant completion bash|zsh",
                           "Prints a completion script for the shell: commands, each command's options, and the\n"
                           "choices or file names their values take (read from `moequant COMMAND --help`).\n"
                           "  bash: eval \"$(moequant completion bash)\" in ~/.bashrc\n"
                           "  zsh:  eval \"$(moequant completion zsh)\" in ~/.zshrc (after compinit)",
                           options);
        return 0;
    }
    if (shell != "bash" && shell != "zsh")
        throw_usage_error(shell.empty() ? "completion needs a shell: bash or zsh" : "no completion for shell '" + shell + "'",
                          {.hint = "moequant completion bash|zsh"});
    std::string commands;
    for (const std::string& name : command_names()) commands += (commands.empty() ? "" : " ") + name;
    const ShellScript& script = shell == "bash" ? bash : zsh;
    std::string text = replaced(script.text, "@FIND_COMMAND@", find_command);
    text = replaced(replaced(replaced(text, "@WORDS@", script.words), "@FIRST@", script.first_word), "@CURRENT@", script.current_word);
    std::cout << replaced(replaced(text, "@COMMANDS@", commands), "@AWK@", help_to_options_awk);
    return 0;
}

}  // namespace moequant::cli
