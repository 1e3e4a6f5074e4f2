"""The hostile-input corpus (issue 19 point 3): malformed inputs for every door into noti."""
