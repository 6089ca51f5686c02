/* help_formats.c — the man page and the bash completion, made from the
** very texts `stoke help <command>` prints (each command's usage string),
** so that the three cannot drift apart: the build writes stoke.1 and the
** completion by running `stoke help --man` and `stoke help --completion
** bash`, and tests/cli/t0011 checks every option of every help text
** against both.
**
** A usage text has a regular shape, which the man page follows:
**   usage: stoke CMD ...             the synopsis (and "       stoke ..." lines)
**   Unindented sentences.            a paragraph
**   heading                          an unindented short line before options
**     -x, --long ARG     text        an option: the flags, two spaces, text
**                        more text   its continuation (indented 20+)
**     stoke ... (other indented)     kept as written (examples) */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

/* One line of roff text: backslashes and hyphens escaped, a leading
** control character defused. */
static void roff_text(FILE *f, const char *s, size_t n) {
  if (n && (s[0] == '.' || s[0] == '\'')) fputs("\\&", f);
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\\') fputs("\\e", f);
    else if (s[i] == '-') fputs("\\-", f);
    else fputc(s[i], f);
  }
}

static size_t indent_of(const char *s, size_t n) {
  size_t i = 0;
  while (i < n && s[i] == ' ') i++;
  return i;
}

/* An option line: "  -b, --batch-size N     text" or "  DATA      text":
** the flags end at the first run of two spaces after them. */
static int option_split(const char *s, size_t n, size_t *lhs_end,
                        size_t *text_at) {
  size_t i = indent_of(s, n);
  if (i < 2 || i > 4 || i >= n) return 0;
  if (s[i] != '-' && !isupper((unsigned char)s[i])) return 0;
  for (size_t j = i; j + 1 < n; j++) {
    if (s[j] == ' ' && s[j + 1] == ' ') {
      size_t k = j;
      while (k < n && s[k] == ' ') k++;
      *lhs_end = j;
      *text_at = k;
      return 1;
    }
  }
  *lhs_end = n; /* flags alone on their line, the text below */
  *text_at = n;
  return 1;
}

/* Does line s[0..n) contain `word`? */
static int line_has(const char *s, size_t n, const char *word) {
  size_t w = strlen(word);
  for (size_t i = 0; i + w <= n; i++)
    if (memcmp(s + i, word, w) == 0) return 1;
  return 0;
}

static void man_usage(FILE *f, const char *usage) {
  enum { NONE, PARA, LIST, OPTION, PRE, SYNOPSIS } mode = NONE;
  const char *p = usage;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    const char *next = nl ? nl + 1 : p + n;
    size_t ind = indent_of(p, n), lhs, at;
    if (mode != LIST && line_has(p, n, "as 'stoke help ")) {
      /* "heading: as 'stoke help bench' (--a, --b,\n  --c)": a paragraph */
      if (mode == PRE || mode == SYNOPSIS) fputs(".fi\n", f);
      fputs(".PP\n", f);
      mode = memchr(p, ')', n) ? PARA : LIST;
      roff_text(f, p, n);
      fputc('\n', f);
    } else if (mode == LIST) {
      roff_text(f, p + ind, n - ind);
      fputc('\n', f);
      if (memchr(p, ')', n)) mode = PARA;
    } else if (n == 0) {
      if (mode == PRE || mode == SYNOPSIS) fputs(".fi\n", f);
      mode = NONE;
    } else if (strncmp(p, "usage: ", 7) == 0 ||
               (mode == SYNOPSIS && ind >= 6)) {
      if (mode != SYNOPSIS) fputs(".PP\n.nf\n", f);
      mode = SYNOPSIS;
      roff_text(f, p + (strncmp(p, "usage: ", 7) == 0 ? 7 : ind),
                n - (strncmp(p, "usage: ", 7) == 0 ? 7 : ind));
      fputc('\n', f);
    } else if (mode == OPTION && ind >= 20) {
      roff_text(f, p + ind, n - ind); /* the option's text goes on */
      fputc('\n', f);
    } else if (option_split(p, n, &lhs, &at)) {
      if (mode == PRE) fputs(".fi\n", f);
      mode = OPTION;
      fputs(".TP\n\\fB", f);
      roff_text(f, p + ind, lhs - ind);
      fputs("\\fR\n", f);
      if (at < n) {
        roff_text(f, p + at, n - at);
        fputc('\n', f);
      }
    } else if (ind > 0) {
      if (mode != PRE) fputs(".PP\n.nf\n", f);
      mode = PRE;
      roff_text(f, p, n);
      fputc('\n', f);
    } else {
      const char *after = next;
      int heading = n < 50 && p[n - 1] != '.' && p[n - 1] != ',' &&
                    strncmp(after, "  ", 2) == 0 && mode != PARA;
      if (mode == PRE) fputs(".fi\n", f);
      if (heading) {
        fputs(".PP\n.B ", f);
        roff_text(f, p, n);
        fputc('\n', f);
        mode = NONE;
      } else {
        if (mode != PARA) fputs(".PP\n", f);
        mode = PARA;
        roff_text(f, p, n);
        fputc('\n', f);
      }
    }
    p = next;
  }
  if (mode == PRE || mode == SYNOPSIS) fputs(".fi\n", f);
}

void cli_print_man(FILE *f, const cli_help_entry *cmds, size_t n,
                   const char *general) {
  fprintf(f, ".\\\" stoke(1), made by `stoke help --man` from the help texts.\n"
             ".TH STOKE 1 \"\" \"stoke %s\" \"User Commands\"\n.nh\n.ad l\n"
             ".SH NAME\nstoke \\- keeps an accelerator fed, and tells you "
             "when it is not\n"
             ".SH SYNOPSIS\n.B stoke\n[\\fB\\-\\-version\\fR] "
             "[\\fB\\-\\-help\\fR] \\fIcommand\\fR [\\fIoptions\\fR]\n"
             ".br\n.B stoke help\n[\\fIcommand\\fR]\n"
             ".SH DESCRIPTION\n",
          stoke_version());
  man_usage(f, general);
  fputs(".SH COMMANDS\n", f);
  for (size_t i = 0; i < n; i++) {
    fputs(".TP\n\\fBstoke ", f);
    roff_text(f, cmds[i].name, strlen(cmds[i].name));
    fputs("\\fR\n", f);
    roff_text(f, cmds[i].summary, strlen(cmds[i].summary));
    fputc('\n', f);
  }
  for (size_t i = 0; i < n; i++) {
    fputs(".SH \"STOKE ", f);
    for (const char *c = cmds[i].name; *c; c++)
      fputc(toupper((unsigned char)*c), f);
    fputs("\"\n", f);
    man_usage(f, cmds[i].usage);
  }
  fputs(".SH EXIT STATUS\n0 on success, 1 when the run failed (the message "
        "names the sample, file and offset), 2 for a usage error, 130 when "
        "interrupted.\n"
        ".SH SEE ALSO\nThe documentation in the source tree's docs/ "
        "folder; the library's header, stoke.h.\n",
        f);
}

/* The long and short options of one usage text, for completion: the
** words starting with '-' in the flag part of its option lines. */
/* The options of one usage text, for completion: the words starting with
** '-' in the flag part of its option lines, and in the lists that name
** another command's options ("as 'stoke help bench' (--a, --b, ...)"). */
static void print_flags(FILE *f, const char *usage) {
  const char *p = usage;
  const char *sep = "";
  int in_list = 0;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    size_t from = 0, to = 0, at;
    if (line_has(p, n, "as 'stoke help ")) in_list = 1;
    else if (in_list && indent_of(p, n) == 0) in_list = 0;
    if (in_list) {
      to = n; /* every word of the list */
      if (memchr(p, ')', n)) in_list = 0;
    } else if (option_split(p, n, &to, &at)) {
      from = indent_of(p, n);
    }
    for (size_t i = from; i < to;) {
      while (i < to && (p[i] == ' ' || p[i] == ',' || p[i] == '(')) i++;
      size_t j = i;
      while (j < to && !strchr(" ,[=()", p[j])) j++;
      if (j > i + 1 && p[i] == '-') {
        fprintf(f, "%s%.*s", sep, (int)(j - i), p + i);
        sep = " ";
      }
      while (j < to && p[j] != ' ' && p[j] != ',') j++;
      i = j;
    }
    p = nl ? nl + 1 : p + n;
  }
}

int cli_print_completion(FILE *f, const char *shell,
                         const cli_help_entry *cmds, size_t n) {
  if (strcmp(shell, "bash") != 0) {
    cli_error("help --completion: '%s' is not a known shell (bash)", shell);
    return CLI_USAGE;
  }
  fputs("# bash completion for stoke, made by `stoke help --completion "
        "bash`\n# from the help texts.\n_stoke() {\n"
        "  local cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]} opts\n"
        "  if [[ $COMP_CWORD -eq 1 ]]; then\n"
        "    COMPREPLY=($(compgen -W \"",
        f);
  for (size_t i = 0; i < n; i++) fprintf(f, "%s ", cmds[i].name);
  fputs("help --version --help\" -- \"$cur\"))\n    return\n  fi\n"
        "  case $cmd in\n",
        f);
  for (size_t i = 0; i < n; i++) {
    fprintf(f, "    %s) opts=\"", cmds[i].name);
    print_flags(f, cmds[i].usage);
    fputs(" --help\" ;;\n", f);
  }
  fputs("    help) opts=\"", f);
  for (size_t i = 0; i < n; i++) fprintf(f, "%s%s", i ? " " : "", cmds[i].name);
  fputs("\" ;;\n    *) return ;;\n  esac\n"
        "  if [[ $cur == -* || $cmd == help ]]; then\n"
        "    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
        "  else\n"
        "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
        "  fi\n}\ncomplete -o filenames -F _stoke stoke\n",
        f);
  return CLI_OK;
}
