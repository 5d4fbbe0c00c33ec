from tfadvisor.cli.app import main

main()
