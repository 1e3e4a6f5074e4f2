from noti.cli import console_main

console_main()
