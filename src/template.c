/*
 * template.c - the one scanner of command templates: {name} placeholders, {{ and }} for literal
 * braces. What a name means, and how its value is quoted, is the caller's (lookup): the `command`
 * cluster type (launchers/command.c) and a job's command (src/jobs/command.c) share this.
 */
#include "internal.h"

#include <errno.h>
#include <string.h>

/*
 * Appends tmpl rendered to out. On an error out is left as it was (its length restored), so a
 * caller may render into a buffer that already holds text.
 */
int lc__template_render(lc__buf *out, const char *tmpl, lc__template_lookup lookup, void *ctx,
                        const char *hint) {
  size_t start = out->len;
  const char *p = tmpl;
  int r = 0;

  while (*p != '\0') {
    const char *open = strpbrk(p, "{}");
    size_t len;
    if (open == NULL) {
      r = lc__buf_puts(out, p);
      goto out;
    }
    if ((r = lc__buf_append(out, p, (size_t)(open - p))) < 0)
      goto out;
    if (open[0] == open[1]) { /* {{ or }} */
      if ((r = lc__buf_append(out, open, 1)) < 0)
        goto out;
      p = open + 2;
      continue;
    }
    if (*open == '}') {
      r = lc__error_set(-EINVAL, "template \"%s\": a lone } (write }} for a brace)", tmpl);
      goto out;
    }
    len = strcspn(open + 1, "}");
    if (open[1 + len] != '}') {
      r = lc__error_set(-EINVAL, "template \"%s\": { without } (write {{ for a brace)", tmpl);
      goto out;
    }
    if ((r = lookup(out, open + 1, len, ctx)) < 0)
      goto out;
    if (r == 0) {
      r = lc__error_set(-EINVAL, "template \"%s\": unknown placeholder {%.*s}%s", tmpl, (int)len,
                        open + 1, hint != NULL ? hint : "");
      goto out;
    }
    p = open + len + 2;
  }
  /* an empty template still yields a string */
  r = lc__buf_append(out, "", 0);

out:
  if (r < 0) {
    if (r == -ENOMEM)
      lc__error_set(-ENOMEM, "out of memory");
    out->len = start;
    if (out->data != NULL)
      out->data[start] = '\0';
    return r;
  }
  return 0;
}
