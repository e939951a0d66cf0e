"""The explorer as a page: the static export of `attnmt explore --export` (`page`); the live page is
served by attnmt.serve."""
