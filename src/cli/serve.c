/*
 * serve.c - `lazyclusterctl serve PORT NAME`: a tiny service for the default `command` cluster:
 * listens on 127.0.0.1:PORT and answers every connection with "NAME\n". Runs until it is killed.
 */
#include "cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int cli_serve(int argc, char **argv) {
  struct sockaddr_in a;
  char line[512];
  long port;
  int one = 1, fd;
  char *end;
  if (argc != 3 || cli_is_help(argv[1])) {
    printf("usage: " CLI_NAME " serve PORT NAME\n"
           "Listens on 127.0.0.1:PORT and answers each connection with NAME (for the default\n"
           "command cluster).\n");
    return argc == 2 && cli_is_help(argv[1]) ? CLI_EXIT_OK : CLI_EXIT_USAGE;
  }
  port = strtol(argv[1], &end, 10);
  if (*end != '\0' || port < 1 || port > 65535)
    return cli_usage_error("serve", "bad port %s", argv[1]);
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
      bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 128) < 0) {
    fprintf(stderr, CLI_NAME " serve: cannot listen on 127.0.0.1:%ld: %s\n", port, strerror(errno));
    return CLI_EXIT_FAIL;
  }
  snprintf(line, sizeof(line), "%s\n", argv[2]);
  printf("%s listening on 127.0.0.1:%ld\n", argv[2], port);
  fflush(stdout);
  for (;;) {
    int c = accept(fd, NULL, NULL);
    if (c < 0)
      continue;
    /* a client that reset first must not end the service with SIGPIPE */
    if (send(c, line, strlen(line), MSG_NOSIGNAL) < 0)
      perror("send");
    close(c);
  }
}
