from noti.cli import main

main()
