module harnessd

go 1.24

require github.com/BurntSushi/toml v1.6.0
