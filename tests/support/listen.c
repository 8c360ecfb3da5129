/*
 * listen.c - a TCP listener for the tests: `listen ADDRESS PORT [SECONDS]` binds ADDRESS:PORT
 * (0.0.0.0, 127.0.0.1, ::, ::1, ...), listens, prints "listening ADDRESS PORT" on stdout and
 * stays until it is killed or SECONDS (default 300) have passed. Exit status 1 when it cannot
 * listen, with the reason on stderr.
 */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
  struct addrinfo hints, *ai = NULL;
  int fd, r, seconds = argc > 3 ? atoi(argv[3]) : 300;

  if (argc < 3) {
    fprintf(stderr, "usage: listen ADDRESS PORT [SECONDS]\n");
    return 2;
  }
  memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
  if ((r = getaddrinfo(argv[1], argv[2], &hints, &ai)) != 0) {
    fprintf(stderr, "listen: %s %s: %s\n", argv[1], argv[2], gai_strerror(r));
    return 1;
  }
  if ((fd = socket(ai->ai_family, SOCK_STREAM, 0)) < 0 ||
      bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 16) != 0) {
    perror("listen");
    return 1;
  }
  freeaddrinfo(ai);
  printf("listening %s %s\n", argv[1], argv[2]);
  fflush(stdout);
  while (seconds-- > 0)
    sleep(1);
  close(fd);
  return 0;
}
