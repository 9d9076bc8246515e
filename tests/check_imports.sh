#!/bin/sh
# check_imports.sh FILE... - fails when one of the files (a shared library or
# a static archive) imports a function that allocates, uses stdio, or edits
# the environment through libc: what code running inside the program's
# malloc must never call (STYLE 13). The imports are nm's undefined symbols,
# so a new call to one of these fails the test that runs this script.
forbidden='malloc|calloc|realloc|reallocarray|free|cfree|memalign|posix_memalign|aligned_alloc|valloc|pvalloc'
forbidden="$forbidden|strdup|strndup|__strdup|__strndup|asprintf|vasprintf|getline|getdelim|open_memstream|realpath"
forbidden="$forbidden|printf|fprintf|sprintf|snprintf|vprintf|vfprintf|vsprintf|vsnprintf|dprintf|vdprintf"
forbidden="$forbidden|__[a-z]*printf_chk|fopen|fopen64|fdopen|freopen|fclose|fwrite|fread|fputs|fputc|putc|puts"
forbidden="$forbidden|putchar|fflush|fgets|fgetc|getc|fscanf|sscanf|scanf|__isoc99_[a-z]*scanf|perror|strerror"
forbidden="$forbidden|setenv|unsetenv|putenv|clearenv|stdout|stderr"
status=0
for f in "$@"; do
    case "$f" in
    *.a) syms=$(nm -u "$f") ;;
    *) syms=$(nm -D --undefined-only "$f") ;;
    esac
    bad=$(printf '%s\n' "$syms" | awk '{print $NF}' | sed 's/@.*//' | grep -xE "$forbidden" | sort -u)
    if [ -n "$bad" ]; then
        echo "$f imports:" $bad
        status=1
    fi
done
[ $status -eq 0 ] && echo "no allocating, stdio or environment-editing imports in: $*"
exit $status
