module harnessd

go 1.25

require github.com/BurntSushi/toml v1.6.0
